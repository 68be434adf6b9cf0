"""`kvds vm overcommit`'s figures: per mechanism and critical tier, pages lost, blocks late against the SLO and
the re-access p99; the nearest-deadline tier judged against the reference mechanism (default memcg) by interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from harness import stats
from harness.results import StoredSummary
from kernel_vm import experiment_figures as fig
from kernel_vm.overcommit import TIERS
from kernel_vm.overcommit_repetition import OvercommitRep

SCHEMA = "kvds.vm-overcommit/1"


@dataclass(frozen=True)
class OvercommitRow(StoredSummary):
    """One mechanism (summary `rows[]`); per-tier lists are indexed by tier, 0 the one that should yield first."""
    STRICT = False
    mechanism: str                       # none, mlock, memcg, madvise-cold or mm-intent
    killed: list[bool]                   # per repetition: the arena process was OOM-killed
    swapped_pages: list[dict[str, Any]]  # per tier, then the spillable blocks: per_rep, mean
    late_blocks: list[dict[str, Any]]    # per tier: blocks whose slowest page read exceeded the SLO: per_rep, mean
    late_share: list[float]              # per tier: mean late blocks / blocks of the tier
    p99_us: list[dict[str, Any]]         # per tier: pooled re-access p99 {value, lo, hi} over repetitions
    intent_stats: dict[str, float]       # mm-intent: the consumer's counters, mean per repetition
    kernel_tiers: list[Any]              # mm-intent: per repetition the kernel's tier -> ranges, bytes and pages
    # kept / yielded / demoted (debugfs mm_intent/ranges; None where the kernel has no such file)
    verdicts: dict[str, Any]             # nearest tier against the reference: late_fewer (paired difference < 0),
    # p99_lower (paired p99 ratio < 1)
    limit_write_s: list[float] | None = None          # per repetition: how long the budget's limit write took
    limit_write_interrupted: list[bool] | None = None  # per repetition: the write was ended by the bound's signal


@dataclass(frozen=True)
class OvercommitSummary(StoredSummary):
    """`kvds vm overcommit`: more critical memory than fits, and which of it each mechanism gives up."""
    schema: str                          # kvds.vm-overcommit/1
    mechanisms: list[str]                # in --mechanisms order
    reference: str                       # the mechanism the others are judged against
    rank: str                            # deadline (tiers differ by deadline, same priority) or priority
    pressure_pct: float                  # share of the arena that may not stay resident
    critical_pct: float                  # share of the arena that is latency-critical
    budget_bytes: int                    # what the arena may keep resident
    critical_bytes: int                  # latency-critical bytes (more than the budget)
    tier_blocks: list[int]               # blocks per tier
    block_bytes: int                     # block size
    slo_us: float                        # a block is late when its slowest page read takes longer
    reps: int                            # repetitions per mechanism (alternating, same layout)
    rows: list[dict[str, Any]]           # OvercommitRow per mechanism
    unavailable: dict[str, str]          # mechanism -> why it did not run here
    clock: str = "wall"                  # wall, or icount:N (QEMU guest instruction-count time)
    mglru: str = "keep"                  # MGLRU for the run: on, off, or keep (left as the host had it)


def _near_verdicts(reps: Sequence[OvercommitRep], ref: Sequence[OvercommitRep]) -> dict[str, Any]:
    top = TIERS - 1
    late = fig.paired_difference([r.late_blocks[top] for r in reps], [r.late_blocks[top] for r in ref])
    ratio = stats.paired_rep_ratio([r.latency_ns[top] for r in reps], [r.latency_ns[top] for r in ref], 99.0)
    return {"late_fewer": fig.judge_below(late, "nearest tier's late blocks - reference's").as_dict(),
            "p99_lower": fig.judge_below(ratio, "nearest tier's p99 / reference's", 1.0).as_dict()}


def overcommit_row(name: str, reps: Sequence[OvercommitRep], ref: Sequence[OvercommitRep] | None) -> OvercommitRow:
    n_tiers = range(TIERS)
    blocks = reps[0].tier_blocks
    stats_keys = sorted({k for r in reps for k in (r.intent_stats or {})})
    return OvercommitRow(
        mechanism=name, killed=[r.killed for r in reps],
        swapped_pages=[fig.counts([r.swapped_pages[i] if r.swapped_pages else 0 for r in reps])
                       for i in range(TIERS + 1)],
        late_blocks=[fig.counts([r.late_blocks[t] for r in reps]) for t in n_tiers],
        late_share=[float(np.mean([r.late_blocks[t] for r in reps])) / max(1, blocks[t]) for t in n_tiers],
        p99_us=[fig.p99_us([r.latency_ns[t] for r in reps]) for t in n_tiers],
        kernel_tiers=[r.kernel_tiers for r in reps],
        intent_stats={k: float(np.mean([(r.intent_stats or {}).get(k, 0) for r in reps])) for k in stats_keys},
        verdicts={} if ref is None else _near_verdicts(reps, ref),
        limit_write_s=[round(r.limit_write_s, 3) for r in reps],
        limit_write_interrupted=[r.limit_write_interrupted for r in reps])
