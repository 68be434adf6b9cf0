"""The I/O track's typed summaries: what each verb's run returns, what summary.json holds and what `--json`
prints inside harness/emit.py's envelope. One conversion to JSON (`as_dict`: NaN and infinities to null) and one
back (`from_json`, for the report and `kvds io repro`). The nested figures (per variant, per point, per tool) keep
the layouts io_priority/README.md documents ("Result directories"): every earlier run reads back unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.results import strict

BENCH_SCHEMA = "kvds.io-bench/1"
SWEEP_SCHEMA = "kvds.io-sweep/1"
FIO_CHECK_SCHEMA = "kvds.io-fio-check/1"
REPRO_SCHEMA = "kvds.io-repro/1"
DRY_RUN_SCHEMA = "kvds.io-bench-plan/1"

S = TypeVar("S", bound="_Summary")


class _Summary:
    """as_dict / from_json shared by every summary here: fields in declaration order, optional ones left out of
    summary.json while None (the layout earlier runs have), strict JSON."""

    OMIT_WHEN_NONE: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return strict({k: v for k, v in out.items() if not (k in self.OMIT_WHEN_NONE and v is None)})

    @classmethod
    def from_json(cls: type[S], stored: dict[str, Any]) -> S:
        kw = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in stored:
                kw[f.name] = stored[f.name]
            elif f.default is not dataclasses.MISSING:
                kw[f.name] = f.default
            else:
                kw[f.name] = None
        return cls(**kw)


@dataclass(frozen=True)
class BenchSummary(_Summary):
    """summary.json of an `io-bench` run: unloaded / baseline / separated on one device, alternating."""
    schema: str                          # "kvds.io-bench/1"
    config: dict[str, Any]               # engine, scheduler, mapping, modes, reps, device, workload, loadavg_start/end
    rep_order: list[list[Any]]           # [[rep, variant], ...] as run: what the interference is paired by
    modes: dict[str, dict[str, Any]]     # per variant: latency_us, interference_factor, clocks, stall_free, stalls,
    # spill_mb_s, spill_retained_est, overlap, block_layer, write_priority (io_priority/README.md)
    ebpf_histograms: str | None          # "ebpf-<variant>-rep<k>.json" with --ebpf, else None
    ebpf_note: str                       # where the block-layer classes per request come from
    goal: dict[str, Any] | None = None   # with all three modes: the sweep's goal judged for "separated"

    OMIT_WHEN_NONE = ("goal",)


@dataclass(frozen=True)
class SweepSummary(_Summary):
    """summary.json of an `io-sweep` run: every (scheduler, mapping) point judged against the goal."""
    schema: str                          # "kvds.io-sweep/1"
    config: dict[str, Any]               # plan, schedulers, mappings, grow, rounds, workload, device, loadavg
    schedulers: dict[str, dict[str, Any]]  # per scheduler: rep_order, reps, reps_per_variant, modes (as a bench's)
    points: list[dict[str, Any]]         # one per scheduler x loaded variant: figures, pareto, goal verdict
    goal: dict[str, Any]                 # met_by, missed_by, inconclusive, reference_stable, unloaded_pair_spread
    ebpf_histograms: str | None          # always None (a sweep records no eBPF histograms)
    ebpf_note: str                       # where the block-layer classes per request come from


@dataclass(frozen=True)
class FioCheckSummary(_Summary):
    """summary.json of an `io-fio-check` run: kvds's reader against fio's, alternating, on one device."""
    schema: str                          # "kvds.io-fio-check/1"
    config: dict[str, Any]               # engine, scheduler, mode, reps, device, workload, loadavg
    rep_order: list[list[Any]]           # [[rep, tool], ...] as run: kvds and fio back to back in each round
    tools: dict[str, dict[str, Any]]     # per tool: reads, latency_us (p50..p99.9), per_rep_p50_us
    fio_runs: list[dict[str, Any]]       # per fio repetition: ios, fio's own p50 and mean (ns), version
    p50_ratio_kvds_over_fio: dict[str, Any]  # estimate, paired by repetition ("pairing" says the rule)
    p99_ratio_kvds_over_fio: dict[str, Any]  # estimate, paired by repetition
    goal_p50_ratio_max: float            # the band's upper edge (1.10), kept for readers of older summaries
    mode: str                            # "unloaded-qd1" or "open-loop N/s, wait sleep"
    wait: str                            # the reader's wait (sleep)
    compared_clock: str                  # submission -> completion on both sides
    fio_command: str                     # fio's command line (scratch paths as <scratch>)
    goal: dict[str, Any]                 # the verdict: p50 (closed loop), p50 and p99 (open loop) within 1 +- 10%
    goal_text: str                       # the verdict as printed
    meets_goal: bool                     # goal.status == "met"
    verdicts: dict[str, Any]             # p50 and p99 verdicts apart


@dataclass(frozen=True)
class ReproSummary(_Summary):
    """What `kvds io repro` prints (it files no run): stored sweeps compared, and the prediction."""
    schema: str                          # "kvds.io-repro/1"
    rule: str                            # stored, paired or unpaired: how the runs' verdicts were (re-)judged
    compare: dict[str, Any]              # runs, rows (point, cells, statuses, same), repeated, judged, elapsed_s
    predict: dict[str, Any] | None = None  # per size: points' verdict chances, all_same, sim seconds
    predict_rule: str | None = None      # paired or unpaired: the rule simulated

    OMIT_WHEN_NONE = ("predict", "predict_rule")


@dataclass(frozen=True)
class BenchPlan(_Summary):
    """What `kvds io bench --dry-run` prints: what a bench would set up and start, changing nothing."""
    schema: str                          # "kvds.io-bench-plan/1"
    device: dict[str, Any]               # path (a loop device is shown as <loop device>), backing, kv_bytes, spill_bytes
    scheduler: str                       # the scheduler the run would select on the device
    rep_order: list[list[Any]]           # [[rep, variant], ...] in the order the run would use
    variants: dict[str, Any]             # per variant: mapping and what it applies (priorities, throttle, pacing)
    commands: list[dict[str, Any]]       # per repetition: variant, rep, and the ioload argv of reader and writer
