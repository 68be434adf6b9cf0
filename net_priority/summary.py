"""The delivery track's typed summaries: what `kvds net bench` returns, what summary.json holds and what `--json`
prints inside harness/emit.py's envelope. Estimates are {value, lo, hi, conf, n, reason} (harness.stats.Estimate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import StoredSummary

BENCH_SCHEMA = "kvds.net-bench/1"
DRY_RUN_SCHEMA = "kvds.net-bench-plan/1"


@dataclass(frozen=True)
class NetVariantFigures(StoredSummary):
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

    STRICT = False  # nested: the summary holding it converts once


@dataclass(frozen=True)
class NetBenchSummary(StoredSummary):
    """summary.json of a `net-bench` run."""
    schema: str                          # "kvds.net-bench/1"
    config: dict[str, Any]               # NetConfig, the lab's names, the HTB plan, loadavg at start and end
    rep_order: list[list[Any]]           # [[rep, variant], ...] as run (what the interference is paired by)
    variants: dict[str, dict[str, Any]]  # per variant: NetVariantFigures
    anchor: dict[str, Any] | None        # sockperf / iperf3 beside kvds in the same run, with the 10% verdict
    commands: list[str]                  # every command kvds ran underneath, in order
    ebpf_note: str                       # where the kernel-side figures come from


@dataclass(frozen=True)
class NetBenchPlan(StoredSummary):
    """`kvds net bench --dry-run`: what a run would create and start (nothing is changed)."""
    schema: str                          # "kvds.net-bench-plan/1"
    config: dict[str, Any]               # the NetConfig the run would use
    lab: dict[str, Any]                  # namespace, interface and address names (the run draws its own 4-hex tag)
    qdisc: str                           # htb or tbf on the prefill side's interface
    htb_classes: list[dict[str, Any]] | None  # minor, rate_mbit, ceil_mbit, prio per HTB leaf (None for tbf)
    variants: dict[str, dict[str, Any]]  # per variant: socket options per role, the endpoint commands of repetition 0
    anchor: list[str] | None             # the standard tools' command lines (None with --no-anchor)
    reps: int                            # repetitions per variant
    order: list[list[Any]]               # [[rep, variant], ...]: the alternating order the run follows
