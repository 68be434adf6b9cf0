"""The typed summaries of the ebpf track's verbs: what each run files as summary.json and `--json` prints
(harness/verbs.py), documented key by key in docs/results.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import StoredSummary


@dataclass(frozen=True)
class RecordSummary(StoredSummary):
    """summary.json of an `ebpf-record` run (and what `kvds ebpf record --json` prints)."""

    backend: str | None            # the loader used: libbpf (runs filed before 2026-12-02 may say bcc)
    backend_detail: str            # how the block events were hooked (tp_btf, or tracepoint and why)
    load_attach_s: float | None    # time to load and attach the probes
    compile_s: float | None        # 0.0 when the object was cached
    duration_s: float | None       # how long events were recorded
    command_status: int | None     # the recorded command's exit status (None: a --duration recording)
    histograms: dict[str, int]     # events counted per histogram
    blk_accounting: dict[str, dict[str, int]]  # "dev/class/op" -> requests timed, unfinished (issued, never seen
    #                                completing), untimed (completion without its issue), overwritten, lost
    probes: list[str] | None = None  # the probe sets recorded
    plots: int | None = None       # PNGs written (one per histogram; 0 with --no-plots)
    results: dict[str, Any] | None = None  # every histogram and count, as ebpf.json (ebpf/README.md: the shape)

    def requests(self) -> tuple[int, int] | None:
        """(block requests timed, requests seen in all) over every device, class and op; None for a recording
        made before kvds accounted for them (or without the blk probe)."""
        if not self.blk_accounting:
            return None
        counts = list(self.blk_accounting.values())
        return sum(c["timed"] for c in counts), sum(sum(c.values()) for c in counts)


@dataclass(frozen=True)
class OverheadSummary(StoredSummary):
    """summary.json of an `ebpf-overhead` run."""
    OMIT_WHEN_NONE = ("program_stats", "program_ns_per_read")  # measured with --prog-stats only

    probes: list[str]                       # probe sets attached in the 'with' runs
    backend: str                            # the loader, with how the block events were hooked
    loadavg: list[float]                    # the load average at the end (1, 5, 15 minutes)
    device: str                             # the kvds loop device read
    scheduler: str                          # its I/O scheduler
    reps: int                               # repetitions per variant
    seconds: float                          # seconds per run
    block_bytes: int                        # O_DIRECT read size
    order: list[str]                        # "repetition:variant" in the order they ran (ABBA)
    iops_without: list[float]               # IOPS per repetition without the probes
    iops_with: list[float]                  # IOPS per repetition with them
    median_iops_without: float              # the median IOPS without the probes
    median_iops_with: float                 # the median IOPS with them
    ratio_mean: float | None                # arithmetic mean of the paired with/without ratios
    ratio_ci95: list[float | None]          # its 95% t interval
    loss_pct: float | None                  # 100 * (1 - ratio_mean)
    ratio_geomean: dict[str, Any]           # geometric mean of the paired ratios, the estimate the goal is judged on
    goal: dict[str, Any]                    # the verdict: IOPS kept >= 0.95 over the whole interval
    goal_text: str                          # the verdict as printed, with its interval
    load_attach_s: list[float]              # load-and-attach time of each 'with' run
    reads_vs_histogram_counts: list[list[int]]  # per 'with' run: reads issued, reads timed by the programs
    missed_events_per_run: list[int]        # program runs the kernel reported skipping, per 'with' run (all devices)
    unfinished_per_run: list[int]           # reads whose completion never reached the programs, per 'with' run
    program_stats: dict[str, dict[str, float]] | None = None  # --prog-stats: per tracepoint, runs and ns per read
    program_ns_per_read: float | None = None  # --prog-stats: ns inside all programs per read


@dataclass(frozen=True)
class LoadTimeSummary(StoredSummary):
    """summary.json of an `ebpf-loadtime` run."""
    runs: int                              # recordings per probe set
    probe_sets: list[str]                  # the probe sets, each comma-separated
    devices: list[str]                     # the device filter the recordings had
    loadavg_before: list[float]            # the load average before the first recording
    loadavg_after: list[float]             # and after the last
    cpus: int | None                       # CPUs on this host
    load_attach: dict[str, dict[str, Any]]  # probe set -> runs_s, median_s, min_s, max_s
    order: list[str]                       # "repetition:probe set" in the order they ran
    compile_s: float                       # the object's compile time before the runs (0.0: cached)
