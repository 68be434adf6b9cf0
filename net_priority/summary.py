"""The delivery track's typed summaries: what `kvds net bench` returns, what summary.json holds and what `--json`
prints inside harness/emit.py's envelope. Estimates are {value, lo, hi, conf, n, reason} (harness.stats.Estimate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import StoredSummary

BENCH_SCHEMA = "kvds.net-bench/1"
DRY_RUN_SCHEMA = "kvds.net-bench-plan/1"
REPRO_SCHEMA = "kvds.net-repro/1"


@dataclass(frozen=True)
class VariantFigures(StoredSummary):
    """One variant (summary.json `variants.<name>`)."""
    mapping: str | None                  # the mapping applied (None: unloaded or baseline, every socket in class 1:10)
    classes: dict[str, Any]              # per role (fetch, bulk): the mapping's network fields, the socket options set
    reps: int                            # repetitions run
    fetches: int                         # fetches measured over all repetitions (warm-up excluded)
    late_fetches: int                    # fetches issued more than one step after their intended time
    latency_us: dict[str, Any]           # fetch latency from its intended issue time: p50, p90, p99 (us)
    service_us: dict[str, Any]           # from its actual issue: p50, p99 (us)
    per_size_p99_us: dict[str, Any]      # per fetch size (bytes): pooled p99 (us), None under 1,000 fetches
    per_rep_p99_us: list[float | None]   # each repetition's p99 (None under 1,000 fetches)
    interference_p99: dict[str, Any] | None  # p99 / the unloaded reference's p99, paired by repetition
    interference_p50: dict[str, Any] | None  # the same for p50
    bulk_mbit: dict[str, Any] | None = field(metadata={"unit": "Mbit/s"})  # bulk throughput while fetching
    bulk_mbit_per_rep: list[float] | None = field(metadata={"unit": "Mbit/s"})  # each repetition's bulk throughput
    bulk_share: dict[str, Any] | None    # bulk throughput / the bottleneck rate, over repetitions
    bulk_kept: dict[str, Any] | None     # bulk throughput / the baseline's (per-repetition means)
    qdisc: dict[str, Any] | None         # per class: bytes, packets, drops, overlimits sent during the fetch windows
    ebpf: dict[str, Any] | None          # with --ebpf: per socket priority queue delay histogram, retransmits
    goal: dict[str, Any] | None          # p99 <= 1.5 x unloaded AND bulk >= 80% of the rate (status, parts, text)
    network_us: dict[str, Any] | None = None      # done - sent per fetch: p50, p90, p99 (us) (None: older runs)
    wake_late_us: dict[str, Any] | None = None    # issued - max(due, previous done): p50, p99 (us)
    interference_p99_network: dict[str, Any] | None = None  # network p99 / unloaded's, paired by repetition
    goal_clock: str | None = None                 # the clock the goal was judged on: "network" (or "e2e": older runs)
    stalls: list[dict[str, Any]] | None = None    # per repetition: stalled, why, run-queue ms per endpoint, lateness
    stalled_reps: int = 0                         # repetitions flagged stalled (net_priority/fetch_clocks.py)
    goal_stall_free: dict[str, Any] | None = None  # the goal on the stall-free pairs only (None: no stall)

    STRICT = False  # nested: the summary holding it converts once


@dataclass(frozen=True)
class BenchSummary(StoredSummary):
    """summary.json of a `net-bench` run."""
    schema: str                          # "kvds.net-bench/1"
    config: dict[str, Any]               # BenchConfig, the lab's names, the HTB plan, loadavg at start and end
    rep_order: list[list[Any]]           # [[rep, variant], ...] as run (what the interference is paired by)
    variants: dict[str, dict[str, Any]]  # per variant: VariantFigures
    anchor: dict[str, Any] | None        # sockperf / iperf3 beside kvds in the same run, with the 10% verdict
    commands: list[str]                  # every command kvds ran underneath, in order
    ebpf_note: str                       # where the kernel-side figures come from


@dataclass(frozen=True)
class BenchPlan(StoredSummary):
    """`kvds net bench --dry-run`: what a run would create and start (nothing is changed)."""
    schema: str                          # "kvds.net-bench-plan/1"
    config: dict[str, Any]               # the BenchConfig the run would use
    lab: dict[str, Any]                  # namespace, interface and address names (the run draws its own 4-hex tag)
    qdisc: str                           # htb or tbf on the prefill side's interface
    htb_classes: list[dict[str, Any]] | None  # minor, rate_mbit, ceil_mbit, prio per HTB leaf (None for tbf)
    variants: dict[str, dict[str, Any]]  # per variant: socket options per role, the endpoint commands of repetition 0
    anchor: list[str] | None             # the standard tools' command lines (None with --no-anchor)
    reps: int                            # repetitions per variant
    order: list[list[Any]]               # [[rep, variant], ...]: the alternating order the run follows


@dataclass(frozen=True)
class ReproSummary(StoredSummary):
    """`kvds net repro` (files no run): stored net-bench runs re-judged and compared, and the repeat prediction."""
    schema: str                          # "kvds.net-repro/1"
    runs: list[str]                      # the runs compared, oldest first
    benched: list[str]                   # the runs this command ran first (--bench N), if any
    rows: list[dict[str, Any]]           # per variant: cells (run, status, text, clock, stalled_reps, stall_free), same
    all_same: bool                       # every variant with a goal got one verdict in every run
    predict: dict[str, Any]              # per variant: chance of met / missed / inconclusive, all_same for `runs` runs
    elapsed_s: float                     # seconds the command took (benches included)
