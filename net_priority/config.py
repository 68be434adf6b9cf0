"""`kvds net bench`'s names and limits, and NetSetup: the lab, path and traffic every module of a bench reads, with
the checks that refuse bad input before anything is created (bench_run.BenchConfig is the command's config: a
NetSetup and what only the command itself needs)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import UserError

UNLOADED, BASELINE = "unloaded", "baseline"
DEFAULT_VARIANTS = (UNLOADED, BASELINE, "net-htb", "net-paced")
QDISCS = ("htb", "tbf")
CLASSIFY = ("priority", "dscp")  # how HTB finds a packet's class: its socket priority, or a u32 filter on its DSCP
LEAVES = ("pfifo", "fq")  # the queue under each bottleneck class: the kernel's default, or fq (enforces pacing)
MAX_RTT_MS = 1000.0
MAX_LOSS_PCT = 50.0
KiB = 1024
MIN_FETCH, MAX_FETCH = 64, 64 * 1024 * 1024
MAX_RATE_MBIT = 100_000.0
SOCKPERF_MAX = 65000  # sockperf's largest TCP message: the anchor's sizes stay at or below it


@dataclass(frozen=True)
class NetSetup:
    """The lab, the path and the traffic of one bench (bench_run.BenchConfig adds what only the command needs).
    Variants: `unloaded` (the fetcher alone: the reference), `baseline` (fetcher
    and bulk mover in one class: what Linux does by default) and any mapping with network fields (net-htb,
    net-paced, a TOML path), run in alternating order, `reps` times each."""
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    rate_mbit: float = 1000.0            # the bottleneck: the prefill side's egress
    qdisc: str = "htb"                   # htb (classes by socket priority) or tbf (one queue: pacing only)
    sizes: tuple[int, ...] = (16 * KiB, 64 * KiB, 256 * KiB)  # fetch sizes, drawn uniformly per fetch
    step_ms: float = 10.0                # one fetch per decode step, open loop (~9% of 1 Gbit with the default sizes)
    duration_s: float = 10.0             # fetching time per repetition: 1,000 fetches at 10 ms, each rep its own p99
    warmup_s: float = 0.5                # the bulk mover runs this long before the first fetch
    reps: int = 5
    bulk_streams: int = 2
    bulk_chunk: int = 4 * 1024 * 1024    # bytes per send() of the bulk mover
    anchor: bool = True                  # sockperf / iperf3 beside kvds's own figures, in the same run
    anchor_size: int = 16 * KiB          # the ping-pong message size the anchor compares
    ebpf: bool = False                   # per-class qdisc delay and retransmits from tracepoints
    fetch_rt: bool = True                # the fetch endpoints SCHED_FIFO (net_priority/procs.py RT_ROLES)
    rtt_ms: float = 0.0                  # netem delay on the return path: added to every round trip
    loss_pct: float = 0.0                # netem random loss on the data path (a netem leaf under each class)
    leaf: str = "pfifo"                  # the queue under each bottleneck class: pfifo (default) or fq
    classify: str = "priority"           # HTB classes by socket priority (default) or by DSCP (u32 filters)
    stall_ms: float = 10.0               # run-queue wait (any fetch-path endpoint) or issue lateness that stalls a rep
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["variants"] = list(self.variants)
        d["sizes"] = list(self.sizes)
        return d

    def check(self) -> None:
        """Bad input is one line naming the problem (exit 2), before any namespace exists."""
        if not 0 < self.rate_mbit <= MAX_RATE_MBIT:
            raise UserError(f"--rate-mbit must be in (0, {MAX_RATE_MBIT:g}], not {self.rate_mbit:g}")
        if self.qdisc not in QDISCS:
            raise UserError(f"--qdisc must be one of {', '.join(QDISCS)}, not {self.qdisc!r}")
        if not self.sizes or any(not MIN_FETCH <= s <= MAX_FETCH for s in self.sizes):
            raise UserError(f"--sizes must be fetch sizes from {MIN_FETCH} B to {MAX_FETCH // (1024 * 1024)} MiB")
        if not self.step_ms > 0:
            raise UserError("--step-ms must be positive")
        if not self.stall_ms > 0:
            raise UserError("--stall-ms must be positive")
        if not self.duration_s > 0:
            raise UserError("--duration-s must be positive")
        if self.reps < 1:
            raise UserError("--reps must be at least 1")
        if self.bulk_streams < 1:
            raise UserError("--bulk-streams must be at least 1")
        if not self.variants or len(set(self.variants)) != len(self.variants):
            raise UserError("--variants must name each variant once")
        if not 0 <= self.rtt_ms <= MAX_RTT_MS:
            raise UserError(f"--rtt-ms must be in [0, {MAX_RTT_MS:g}], not {self.rtt_ms:g}")
        if not 0 <= self.loss_pct <= MAX_LOSS_PCT:
            raise UserError(f"--loss-pct must be in [0, {MAX_LOSS_PCT:g}], not {self.loss_pct:g}")
        if self.leaf not in LEAVES:
            raise UserError(f"--leaf must be one of {', '.join(LEAVES)}, not {self.leaf!r}")
        if self.classify not in CLASSIFY:
            raise UserError(f"--classify must be one of {', '.join(CLASSIFY)}, not {self.classify!r}")
        if self.classify == "dscp" and self.qdisc != "htb":
            raise UserError(f"--classify dscp needs --qdisc htb (a {self.qdisc} root has one queue)")
        if self.loss_pct and self.leaf != "pfifo":
            raise UserError(f"--loss-pct puts a netem leaf under each class: it cannot go with --leaf {self.leaf}")
        if not MIN_FETCH <= self.anchor_size <= SOCKPERF_MAX:
            raise UserError(f"--anchor-size must be {MIN_FETCH}-{SOCKPERF_MAX} bytes (sockperf's largest TCP message)")




def path_qdiscs(cfg: NetSetup) -> list[str]:
    """The qdisc kinds the path needs beyond the bottleneck's own (doctor rows net.qdisc.<kind>)."""
    return (["netem"] if cfg.rtt_ms or cfg.loss_pct else []) + (["fq"] if cfg.leaf == "fq" else [])
