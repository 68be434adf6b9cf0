"""The I/O track's typed summaries: what each verb's run returns, what summary.json holds and what `--json`
prints inside harness/emit.py's envelope. One conversion to JSON (`as_dict`: NaN and infinities to null) and one
back (`from_json`, for the report and `kvds io repro`). The nested figures (per variant, per point, per tool) keep
the layouts io_priority/README.md documents ("Result directories"): every earlier run reads back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import StoredSummary

BENCH_SCHEMA = "kvds.io-bench/1"
SWEEP_SCHEMA = "kvds.io-sweep/1"
FIO_CHECK_SCHEMA = "kvds.io-fio-check/1"
REPRO_SCHEMA = "kvds.io-repro/1"
DRY_RUN_SCHEMA = "kvds.io-bench-plan/1"

@dataclass(frozen=True)
class VariantFigures(StoredSummary):
    """One variant of a bench or a sweep (summary.json `modes.<variant>`, `schedulers.<s>.modes.<variant>`);
    estimates are {value, lo, hi, conf, n, reason}, interference ones also `pairing` (io_priority/pairing.py)."""
    mapping: str | None                  # the mapping applied (None: the reader alone, the unloaded reference)
    applied: dict[str, Any] | None       # what it applied: read_ioprio, write_ioprio, write_throttle_mbps, spill_pacing
    reps: int                            # repetitions run
    reads: int                           # critical reads over all repetitions
    read_errors: int                     # reads that failed
    late_reads: int                      # reads submitted after their due time
    latency_us: dict[str, Any]           # end-to-end p50, p90, p99, p99.9 (us), each an estimate over repetitions
    max_us: float | None                 # the slowest read (us)
    per_rep_p99_us: list[float | None]   # each repetition's p99 (None under 1,000 reads)
    interference_factor: dict[str, Any] | None  # p99 / the unloaded reference's p99, all reads, paired by repetition
    spill_mb_s: dict[str, Any] | None = field(metadata={"unit": "MB/s"})  # spill throughput, mean over
    # repetitions with its interval
    spill_mb_s_per_rep: list[float] | None = field(metadata={"unit": "MB/s"})  # each repetition's spill MB/s
    writes: int | None                   # spill writes completed
    write_errors: int | None             # spill writes that failed
    spill_gated_fraction: float | None   # share of the run the writer was held back by pacing
    block_layer: dict[str, Any] | None   # tracefs: requests per direction and class/level, lost events, issuers
    ebpf_block_layer: dict[str, Any] | None  # with --ebpf: the eBPF histograms' requests per direction and class
    overlap: dict[str, Any] | None       # clean reads (no spill write beside them) and their interference
    clocks: dict[str, Any]               # end_to_end, wakeup, backlog, service p50/p99 (us), interference, excess
    stalls: dict[str, Any]               # stalls found (threshold_ms, count, reps, reads delayed, where)
    stall_free: dict[str, Any]           # the clocks without the reads stalls delayed (the goal's service time)
    block_service_us: dict[str, Any] | None  # block layer issue -> complete p50/p99 per direction and class (us)
    per_rep_service_p99_us: list[float | None] | None  # each repetition's stall-free service p99 (us)
    write_priority: dict[str, Any] | None  # did the spill's writes carry the class asked for (asked, honoured_fraction)
    spill_retained: float | None = None  # spill MB/s / the baseline's
    spill_retained_est: dict[str, Any] | None = None  # the same with its interval over repetitions
    final_fsync_ms: float | None = None  # with a writer: the final fsync (ms), counted in the MB/s
    spill_v2: dict[str, Any] | None = None  # spill scheduler v2: model_q, batches, probes, model, window
    pacer: dict[str, Any] | None = None  # the v1 slack pacer's learned estimates per repetition (us)
    host_load: dict[str, Any] | None = None  # per repetition: other work's cores, steal, CPU pressure, busy
    # (io_priority/host_load.py); busy_reps, the maxima and the threshold

    OMIT_WHEN_NONE = ("final_fsync_ms", "spill_v2", "pacer", "host_load")
    STRICT = False  # nested: the summary holding it converts once (NaN stays NaN for the judging in between)


@dataclass(frozen=True)
class SweepPoint(StoredSummary):
    """One scheduler x loaded variant of a sweep (summary.json `points[]`), judged against the goal."""
    scheduler: str                       # the I/O scheduler it ran under
    variant: str                         # the variant: baseline or a mapping's name
    mapping: str | None                  # the mapping applied ("none" for the baseline)
    p99_us: dict[str, Any]               # critical-read end-to-end p99 (us), estimate over repetitions
    p50_us: dict[str, Any]               # critical-read end-to-end p50 (us)
    interference_factor: dict[str, Any] | None  # end-to-end p99 / the unloaded reference's, all reads
    spill_mb_s: dict[str, Any] | None = field(metadata={"unit": "MB/s"})  # spill throughput
    spill_retained: float | None         # spill MB/s / the baseline's (point estimate)
    spill_retained_est: dict[str, Any] | None  # the same with its interval: what the goal's spill part is judged from
    overlap: dict[str, Any] | None       # clean reads and their interference (VariantFigures.overlap)
    interference_service: dict[str, Any] | None  # stall-free service-time interference: what the goal is judged from
    interference_e2e_stall_free: dict[str, Any] | None  # stall-free end-to-end interference, printed beside it
    excess: dict[str, Any] | None        # the p99 tail's excess over the reference, host / device share
    stalls: int | None                   # stalls found in this variant's repetitions
    reps: int | None                     # its repetitions (auto-grow gives wide points more)
    pareto: bool | None                  # on the Pareto frontier (None: no p99 or no spill to place it)
    goal: dict[str, Any]                 # status (met / missed / inconclusive, or reference), parts, text
    meets_goal: bool                     # goal.status == "met"
    end_to_end: dict[str, Any] | None = None  # the end-to-end verdict, printed beside the goal (not the baseline)

    OMIT_WHEN_NONE = ("end_to_end",)
    STRICT = False  # nested: the summary holding it converts once


@dataclass(frozen=True)
class BenchSummary(StoredSummary):
    """summary.json of an `io-bench` run: unloaded / baseline / separated on one device, alternating."""
    schema: str                          # "kvds.io-bench/1"
    config: dict[str, Any]               # engine, scheduler, mapping, modes, reps, device, workload, loadavg_start/end
    rep_order: list[list[Any]]           # [[rep, variant], ...] as run: what the interference is paired by
    modes: dict[str, dict[str, Any]]     # per variant: its figures, key by key in io.bench.modes (VariantFigures)
    ebpf_histograms: str | None          # "ebpf-<variant>-rep<k>.json" with --ebpf, else None
    ebpf_note: str                       # where the block-layer classes per request come from
    goal: dict[str, Any] | None = None   # with all three modes: the sweep's goal judged for "separated"

    OMIT_WHEN_NONE = ("goal",)


@dataclass(frozen=True)
class SweepSummary(StoredSummary):
    """summary.json of an `io-sweep` run: every (scheduler, mapping) point judged against the goal."""
    schema: str                          # "kvds.io-sweep/1"
    config: dict[str, Any]               # plan, schedulers, mappings, grow, rounds, workload, device, loadavg
    schedulers: dict[str, dict[str, Any]]  # per scheduler: rep_order, reps, reps_per_variant, modes (io.bench.modes)
    points: list[dict[str, Any]]         # one per scheduler x loaded variant, key by key in io.sweep.points
    goal: dict[str, Any]                 # met_by, missed_by, inconclusive, reference_stable, unloaded_pair_spread
    ebpf_histograms: str | None          # always None (a sweep records no eBPF histograms)
    ebpf_note: str                       # where the block-layer classes per request come from


@dataclass(frozen=True)
class FioCheckSummary(StoredSummary):
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
class ReproSummary(StoredSummary):
    """What `kvds io repro` prints (it files no run): stored sweeps compared, and the prediction."""
    schema: str                          # "kvds.io-repro/1"
    rule: str                            # stored, paired or unpaired: how the runs' verdicts were (re-)judged
    compare: dict[str, Any]              # runs, rows (point, cells, statuses, same), repeated, judged, elapsed_s
    predict: dict[str, Any] | None = None  # per size: points' verdict chances, all_same, sim seconds
    predict_rule: str | None = None      # paired or unpaired: the rule simulated

    OMIT_WHEN_NONE = ("predict", "predict_rule")


@dataclass(frozen=True)
class BenchPlan(StoredSummary):
    """What `kvds io bench --dry-run` prints: what a bench would set up and start, changing nothing."""
    schema: str                          # "kvds.io-bench-plan/1"
    device: dict[str, Any]               # path (a loop device: <loop device>), backing, kv_bytes, spill_bytes
    scheduler: str                       # the scheduler the run would select on the device
    rep_order: list[list[Any]]           # [[rep, variant], ...] in the order the run would use
    variants: dict[str, Any]             # per variant: mapping and what it applies (priorities, throttle, pacing)
    commands: list[dict[str, Any]]       # per repetition: variant, rep, and the ioload argv of reader and writer
