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
class TwoHosts:
    """Prefill endpoints on one host, decode endpoints on another (net_priority/two_hosts.py): two SSH targets, or
    `netns_lab`: two sshd hosts in network namespaces on this machine, joined by one veth pair."""
    prefill: str = ""                    # ssh://[user@]host[:port]: the sender (KV answers, bulk), the bottleneck
    decode: str = ""                     # the fetcher and the bulk receiver
    decode_ip: str = ""                  # the decode host's data address (default: its SSH host's address)
    python: str = ""                     # kvds's Python on both hosts (default: this one's path)
    root: str = ""                       # kvds's directory on the hosts (default ~/.kvds-remote)
    netns: str = ""                      # run there inside this kvds-* namespace holding the data NIC (real hosts)
    identity: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    netns_lab: bool = False

    def check(self) -> None:
        import ipaddress

        from harness.remote.targets import SshTarget, parse_target

        if self.netns_lab:
            if self.prefill or self.decode:
                raise UserError("--netns-hosts builds its own two hosts: give it without --prefill-host/--decode-host")
            return
        if not (self.prefill and self.decode):
            raise UserError("a two-host bench needs both --prefill-host and --decode-host")
        for what, text in (("--prefill-host", self.prefill), ("--decode-host", self.decode)):
            if not isinstance(parse_target(text), SshTarget):
                raise UserError(f"{what} must be an ssh://[user@]host[:port] target, not {text!r}")
        if self.netns and not self.netns.startswith("kvds-"):
            raise UserError(f"--remote-netns must name a kvds namespace (kvds-*), not {self.netns!r}: kvds changes "
                            "qdiscs only in its own namespaces")
        if self.prefill == self.decode:
            raise UserError("--prefill-host and --decode-host name the same host")
        if self.decode_ip:
            try:
                ipaddress.ip_address(self.decode_ip)
            except ValueError:
                raise UserError(f"--decode-ip must be an IP address, not {self.decode_ip!r}") from None


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
    two_hosts: TwoHosts | None = None    # prefill and decode endpoints on two hosts (None: this host's lab)
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
        if self.two_hosts is not None:
            self._check_two_hosts()

    def _check_two_hosts(self) -> None:
        """Between two hosts only the DSCP mark crosses the wire, and only the sender's side is shaped."""
        assert self.two_hosts is not None
        self.two_hosts.check()
        if self.classify != "dscp":
            raise UserError("two hosts classify by DSCP (--classify dscp): a socket priority never leaves its host")
        for flag, on in (("--ebpf", self.ebpf), ("--rtt-ms", self.rtt_ms), ("the anchor (use --no-anchor)",
                                                                         self.anchor)):
            if on:
                raise UserError(f"{flag} runs on this host's own lab only, not across two hosts")




def path_qdiscs(cfg: NetSetup) -> list[str]:
    """The qdisc kinds the path needs beyond the bottleneck's own (doctor rows net.qdisc.<kind>)."""
    return (["netem"] if cfg.rtt_ms or cfg.loss_pct else []) + (["fq"] if cfg.leaf == "fq" else [])
