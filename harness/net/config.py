"""`kvds net bench`'s one config (cli.py parses the arguments into it; bench_run.py runs it), and the checks that
refuse bad input before anything is created."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import UserError

UNLOADED, BASELINE = "unloaded", "baseline"
DEFAULT_VARIANTS = (UNLOADED, BASELINE, "net-htb", "net-paced")
QDISCS = ("htb", "tbf")
KiB = 1024
MIN_FETCH, MAX_FETCH = 64, 64 * 1024 * 1024
MAX_RATE_MBIT = 100_000.0
SOCKPERF_MAX = 65000  # sockperf's largest TCP message: the anchor's sizes stay at or below it


@dataclass(frozen=True)
class NetConfig:
    """Everything one bench run needs. Variants: `unloaded` (the fetcher alone: the reference), `baseline` (fetcher
    and bulk mover in one class: what Linux does by default) and any mapping with network fields (net-htb,
    net-paced, a TOML path), run in alternating order, `reps` times each."""
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    rate_mbit: float = 1000.0            # the bottleneck: the prefill side's egress
    qdisc: str = "htb"                   # htb (classes by socket priority) or tbf (one queue: pacing only)
    sizes: tuple[int, ...] = (16 * KiB, 64 * KiB, 256 * KiB)  # fetch sizes, drawn uniformly per fetch
    step_ms: float = 10.0                # one fetch per decode step, open loop (~9% of 1 Gbit with the default sizes)
    duration_s: float = 4.0              # fetching time per repetition
    warmup_s: float = 0.5                # the bulk mover runs this long before the first fetch
    reps: int = 5
    bulk_streams: int = 2
    bulk_chunk: int = 4 * 1024 * 1024    # bytes per send() of the bulk mover
    anchor: bool = True                  # sockperf / iperf3 beside kvds's own figures, in the same run
    anchor_size: int = 16 * KiB          # the ping-pong message size the anchor compares
    ebpf: bool = False                   # per-class qdisc delay and retransmits from tracepoints
    fetch_rt: bool = True                # the fetch endpoints SCHED_FIFO (harness/net/procs.py RT_ROLES)
    seed: int = 0
    verbose: bool = False                # print each command kvds starts
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
        if not self.duration_s > 0:
            raise UserError("--duration-s must be positive")
        if self.reps < 1:
            raise UserError("--reps must be at least 1")
        if self.bulk_streams < 1:
            raise UserError("--bulk-streams must be at least 1")
        if not self.variants or len(set(self.variants)) != len(self.variants):
            raise UserError("--variants must name each variant once")
        if not MIN_FETCH <= self.anchor_size <= SOCKPERF_MAX:
            raise UserError(f"--anchor-size must be {MIN_FETCH}-{SOCKPERF_MAX} bytes (sockperf's largest TCP message)")


def parse_size(text: str) -> int:
    """'16K' / '256KiB' / '1M' / '4096' -> bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    if t and t[-1] in "KMG":
        mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[t[-1]]
        t = t[:-1]
    try:
        v = int(float(t) * mult)
    except ValueError:
        raise UserError(f"{text!r} is not a size (like 16K, 256K, 1M)") from None
    if v <= 0:
        raise UserError(f"{text!r} is not a positive size")
    return v
