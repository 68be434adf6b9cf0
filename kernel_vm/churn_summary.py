"""`kvds vm churn`'s figures: per mechanism, the calls and CPU time it takes to keep the kernel's view of a decode
loop current, per step and per second at the decode step rate, judged against madvise by interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from harness import stats
from harness.results import StoredSummary
from kernel_vm import experiment_figures as fig

SCHEMA = "kvds.vm-churn/1"


@dataclass(frozen=True)
class ChurnRep:
    """One repetition of one mechanism: per step, calls made, this thread's CPU ns and wall ns."""
    calls: list[int]
    cpu_ns: list[int]
    wall_ns: list[int]
    errors: list[str]


@dataclass(frozen=True)
class ChurnRow(StoredSummary):
    """One mechanism (summary `rows[]`)."""
    STRICT = False
    mechanism: str                       # madvise, mlock or mm-intent
    calls_per_step: dict[str, Any]       # syscalls per decode step: per_rep means, mean{value, lo, hi}
    calls_per_s: dict[str, Any]          # the same at the decode step rate (1000 / step_ms steps per second)
    cpu_us_per_step: dict[str, Any]      # CPU time (user + system, the calling thread) per step: per_rep, mean
    cpu_us_step_p99: dict[str, Any]      # p99 over steps of the CPU time of one step (pooled, over repetitions)
    cpu_share_of_step: dict[str, Any]    # mean CPU per step / step_ms
    wall_us_per_step: dict[str, Any]     # wall time in the calls per step: per_rep, mean
    errors: list[str]                    # calls the kernel refused (first few)
    verdicts: dict[str, Any]             # against the reference: calls_fewer (paired difference per step < 0),
    # cpu_less (ratio of the means of CPU per step < 1)


@dataclass(frozen=True)
class ChurnSummary(StoredSummary):
    """`kvds vm churn`: what keeping each mechanism current costs in a decode loop."""
    schema: str                          # kvds.vm-churn/1
    workload: dict[str, Any]             # blocks, block_bytes, requests, batch, steps, lifetime, layout, seed
    step_ms: float                       # the decode step the per-second figures assume
    reps: int                            # repetitions per mechanism (alternating)
    reference: str                       # the mechanism the others are judged against (madvise)
    blocks_changing_per_step: float      # blocks whose hot/cold state changes per step (mean over steps 1..)
    requests_changing_per_step: float    # requests finishing per step: lines a per-range update would write
    intent_ranges: int                   # ranges one mm_intent registration holds (0: not expressible)
    rows: list[dict[str, Any]]           # ChurnRow per mechanism
    unavailable: dict[str, str]          # mechanism -> why it did not run here
    clock: str = "wall"                  # wall, or icount:N (QEMU guest instruction-count time)


def _per_rep_means(reps: Sequence[ChurnRep], key: str, scale: float = 1.0) -> list[float]:
    return [float(np.mean(getattr(r, key))) * scale for r in reps]


def churn_row(name: str, reps: Sequence[ChurnRep], ref: Sequence[ChurnRep] | None, step_ms: float) -> ChurnRow:
    calls = _per_rep_means(reps, "calls")
    cpu = _per_rep_means(reps, "cpu_ns", 1e-3)
    verdicts: dict[str, Any] = {}
    if ref is not None:
        diff = fig.paired_difference(calls, _per_rep_means(ref, "calls"))
        verdicts = {"calls_fewer": fig.judge_below(diff, "calls per step - madvise's").as_dict(),
                    "cpu_less": fig.ratio_below_one(cpu, _per_rep_means(ref, "cpu_ns", 1e-3),
                                                    "CPU per step / madvise's").as_dict()}
    steps_per_s = 1000.0 / step_ms
    p99 = stats.rep_percentiles([np.asarray(r.cpu_ns, float) / 1000.0 for r in reps], (99.0,))[99.0]
    return ChurnRow(
        mechanism=name, calls_per_step=fig.counts(calls), calls_per_s=fig.counts([c * steps_per_s for c in calls]),
        cpu_us_per_step=fig.counts(cpu), cpu_us_step_p99=p99.as_dict(),
        cpu_share_of_step=fig.counts([c / (step_ms * 1000.0) for c in cpu]),
        wall_us_per_step=fig.counts(_per_rep_means(reps, "wall_ns", 1e-3)),
        errors=sorted({e for r in reps for e in r.errors})[:5], verdicts=verdicts)
