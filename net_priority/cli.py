"""`kvds net ...`: the delivery track's commands in the one run shape (harness/verbs.py). `kvds net bench`:
decode-critical KV fetches against bulk KV migration over one bottleneck; `config` parses the arguments into a
BenchConfig and refuses bad input (exit 2) or a missing mechanism (exit 3) before anything exists."""

from __future__ import annotations

import argparse

from harness.cli_args import nonneg_float, positive_float, positive_int, require_root
from harness.errors import UserError
from harness.remote import add_target_args
from harness.units import parse_size
from harness.verbs import Verb, add
from net_priority import bench_run, render, repro_run
from net_priority.bench_run import BenchConfig
from net_priority.classes import mappings_of, needed_capabilities
from net_priority.config import CLASSIFY, DEFAULT_VARIANTS, LEAVES, QDISCS, TwoHosts
from net_priority.repro_run import ReproConfig
from net_priority.summary import BenchSummary, ReproSummary


def parse_size_arg(text: str) -> int:
    """One size for argparse (harness.units: binary units, 16K = 16 KiB = 16384 bytes, M = MB = MiB = 2^20)."""
    try:
        return parse_size(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _sizes(text: str) -> tuple[int, ...]:
    out = tuple(parse_size_arg(t) for t in text.split(",") if t.strip())
    if not out:
        raise argparse.ArgumentTypeError("--sizes needs at least one size")
    return out


def _variants(text: str) -> tuple[str, ...]:
    out = tuple(t.strip() for t in text.split(",") if t.strip())
    if not out:
        raise argparse.ArgumentTypeError("--variants needs at least one variant")
    return out


def bench_arguments(b: argparse.ArgumentParser) -> None:
    d = BenchConfig()
    b.add_argument("--variants", type=_variants, default=d.variants,
                   help=f"comma list: unloaded, baseline and mappings with network fields (default "
                        f"{','.join(DEFAULT_VARIANTS)})")
    b.add_argument("--rate-mbit", type=positive_float, default=d.rate_mbit, help="bottleneck rate (default 1000)")
    b.add_argument("--qdisc", choices=QDISCS, default=d.qdisc, help="bottleneck qdisc (default htb)")
    b.add_argument("--classify", choices=CLASSIFY, default=None,
                   help="how the HTB root finds a packet's class: its socket priority (SO_PRIORITY, this host only: "
                        "the default on one host) or its DSCP mark (IP_TOS, u32 filters: what survives between hosts; "
                        "the default and the only choice across two hosts)")
    b.add_argument("--rtt-ms", type=nonneg_float, default=d.rtt_ms,
                   help="round-trip delay added by netem on the return path (default 0; the host needs netem: the "
                        "guest lab's net kernel has it)")
    b.add_argument("--loss-pct", type=nonneg_float, default=d.loss_pct,
                   help="random loss on the data path, a netem leaf under each bottleneck class (default 0)")
    b.add_argument("--leaf", choices=LEAVES, default=d.leaf,
                   help="the queue under each bottleneck class: pfifo (the kernel's default) or fq, which enforces "
                        "the sockets' pacing rates instead of TCP's own pacing")
    b.add_argument("--sizes", type=_sizes, default=d.sizes,
                   help="fetch sizes, binary units (16K = 16384 bytes; K/KB/KiB alike), e.g. 16K,64K,256K (default)")
    b.add_argument("--step-ms", type=positive_float, default=d.step_ms,
                   help=f"one fetch per decode step (default {d.step_ms:g})")
    b.add_argument("--duration-s", type=positive_float, default=d.duration_s,
                   help=f"fetching per repetition (default {d.duration_s:g}: {d.duration_s * 1e3 / d.step_ms:,.0f} "
                        "fetches at the default step, enough for each repetition's own p99)")
    b.add_argument("--reps", type=positive_int, default=d.reps, help=f"repetitions per variant (default {d.reps})")
    b.add_argument("--bulk-streams", type=positive_int, default=d.bulk_streams, help="bulk TCP streams (default 2)")
    b.add_argument("--no-anchor", action="store_true", help="skip the sockperf / iperf3 anchor")
    b.add_argument("--anchor-size", type=parse_size_arg, default=d.anchor_size,
                   help="ping-pong message size of the anchor, binary units (default 16K = 16384 bytes; at most "
                        "65000, sockperf's limit)")
    b.add_argument("--ebpf", action="store_true", help="per-class qdisc delay and retransmits from tracepoints")
    b.add_argument("--no-fetch-rt", action="store_true",
                   help="run the fetcher and its server at normal CPU priority (default: SCHED_FIFO, chrt -f 10, in "
                        "every variant: the lab's bulk endpoints copy through a veth on this host's CPUs, a NIC "
                        "would not, and that CPU contention is not what the mechanisms are measured against)")
    b.add_argument("--stall-ms", type=positive_float, default=d.stall_ms,
                   help=f"a repetition is stalled when an endpoint of the fetch path waited on a run queue longer "
                        f"than this in total, or a fetch was issued this late (default {d.stall_ms:g})")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--verbose", action="store_true", help="print each command kvds starts")
    g = b.add_argument_group("two hosts (prefill endpoints on one, decode endpoints on the other; "
                             "net_priority/two_hosts.py; --identity, --known-hosts, --accept-new-host-key and "
                             "--remote-root apply)")
    g.add_argument("--prefill-host", metavar="ssh://[USER@]HOST[:PORT]",
                   help="the sender: fetch server and bulk sender; the bottleneck on its egress to the decode host")
    g.add_argument("--decode-host", metavar="ssh://[USER@]HOST[:PORT]", help="the fetcher and the bulk receiver")
    g.add_argument("--decode-ip", metavar="ADDR", default="",
                   help="the decode host's address on the data link (default: its SSH host's address)")
    g.add_argument("--remote-python", metavar="PATH", default="",
                   help="kvds's Python on both hosts (default: this one's path, as on hosts sharing this filesystem)")
    g.add_argument("--remote-netns", metavar="kvds-NAME", default="",
                   help="on both hosts, run inside this network namespace (one holding the data NIC; kvds changes "
                        "qdiscs only in kvds-* namespaces; default: where the SSH login lands)")
    g.add_argument("--netns-hosts", action="store_true",
                   help="build the two hosts here: sshd in two network namespaces joined by one veth pair "
                        "(harness/remote/netns_hosts.py), then run across them")
    b.add_argument("--dry-run", action="store_true",
                   help="print the lab, the classes and every command a run would start; change nothing")
    add_target_args(b)  # --target guest / ssh://...: harness/remote runs this same command there (the whole lab)


def two_hosts_of(args: argparse.Namespace) -> TwoHosts | None:
    if not (args.prefill_host or args.decode_host or args.netns_hosts):
        if args.decode_ip or args.remote_python or args.remote_netns:
            raise UserError("--decode-ip, --remote-python and --remote-netns go with --prefill-host/--decode-host")
        return None
    return TwoHosts(prefill=args.prefill_host or "", decode=args.decode_host or "", decode_ip=args.decode_ip,
                    python=args.remote_python, root=args.remote_root or "", netns=args.remote_netns,
                    identity=args.identity,
                    known_hosts=args.known_hosts, accept_new_host_key=args.accept_new_host_key,
                    netns_lab=args.netns_hosts)


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """The typed config, checked: bad input exit 2, a run without root exit 2 (NeedsRoot), before anything."""
    two = two_hosts_of(args)
    cfg = BenchConfig(variants=args.variants, rate_mbit=args.rate_mbit, qdisc=args.qdisc, sizes=args.sizes,
                      step_ms=args.step_ms, duration_s=args.duration_s, reps=args.reps,
                      bulk_streams=args.bulk_streams, anchor=not args.no_anchor and two is None,
                      anchor_size=args.anchor_size, two_hosts=two,
                      ebpf=args.ebpf, seed=args.seed, fetch_rt=not args.no_fetch_rt, rtt_ms=args.rtt_ms,
                      loss_pct=args.loss_pct, leaf=args.leaf,
                      classify=args.classify or ("dscp" if two is not None else "priority"), stall_ms=args.stall_ms,
                      verbose=args.verbose)
    cfg.check()
    mappings_of(cfg)  # unknown mappings and impossible combinations: exit 2 before the root check
    if not args.dry_run:
        require_root("kvds net bench")
    return cfg


BENCH = Verb(name="bench", help="unloaded / baseline / mapped variants over a veth bottleneck, alternating",
             arguments=bench_arguments, config=bench_config, run=bench_run.run, render=render.bench,
             summary=BenchSummary, dry_run=bench_run.dry_run, render_dry_run=render.bench_dry_run)


def repro_arguments(r: argparse.ArgumentParser) -> None:
    d = ReproConfig()
    r.add_argument("runs", nargs="*", metavar="RUN", help="stored net-bench runs (id or unique prefix; default: "
                                                          f"the newest {d.last})")
    r.add_argument("--last", type=positive_int, default=d.last, help=f"without RUN: the newest N runs (default "
                                                                      f"{d.last})")
    r.add_argument("--bench", type=positive_int, default=0, metavar="N",
                   help="first run N default `kvds net bench`es back to back (needs root), then compare those")
    r.add_argument("--reps", type=positive_int, default=None,
                   help="repetitions of the predicted run (default: the compared runs' own)")
    r.add_argument("--agree", type=positive_int, default=d.agree,
                   help=f"the prediction's number of back-to-back runs that must agree (default {d.agree})")


def repro_config(args: argparse.Namespace) -> ReproConfig:
    if args.bench and args.runs:
        raise UserError("kvds net repro: give stored RUNs or --bench N, not both")
    if args.bench:
        require_root("kvds net repro --bench")
        from harness import doctor

        doctor.require(*needed_capabilities(BenchConfig(), mappings_of(BenchConfig())))
    return ReproConfig(runs=tuple(args.runs), last=args.last, bench=args.bench or 0, reps=args.reps,
                       agree=args.agree)


REPRO = Verb(name="repro", help="does the bench's verdict repeat? stored runs re-judged and compared, the chance of "
                               "a repeat predicted", arguments=repro_arguments, config=repro_config,
             run=repro_run.run, render=render.repro, summary=ReproSummary, results_line=False)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("net", help="KV delivery between a prefill and a decode host: fetch latency under bulk transfer")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    verbs.required = True
    b = add(verbs, BENCH)
    b.set_defaults(guest_lab="net")  # --target guest boots the net lab kernel (qemu_validation/guest_target.py)
    add(verbs, REPRO)
