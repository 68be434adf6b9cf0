"""`kvds net bench`: decode-critical KV fetches against bulk KV migration over one bottleneck (issue 18). Parses
the arguments into one NetConfig and hands it to bench_run; render.py prints, harness/emit.py with --json."""

from __future__ import annotations

import argparse

from harness.cli_args import add_json_flag, nonneg_float, positive_float, positive_int, require_root
from harness.emit import emit
from harness.errors import UserError
from net_priority.config import CLASSIFY, DEFAULT_VARIANTS, LEAVES, QDISCS, NetConfig, parse_size
from harness.progress import say
from harness.remote import add_target_args


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(parse_size(t) for t in text.split(",") if t.strip())
    except UserError as exc:
        raise argparse.ArgumentTypeError(f"--sizes: {exc}") from None


def _variants(text: str) -> tuple[str, ...]:
    out = tuple(t.strip() for t in text.split(",") if t.strip())
    if not out:
        raise argparse.ArgumentTypeError("--variants needs at least one variant")
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("net", help="KV delivery between a prefill and a decode host: fetch latency under bulk transfer")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    verbs.required = True
    b = verbs.add_parser("bench", help="unloaded / baseline / mapped variants over a veth bottleneck, alternating")
    d = NetConfig()
    b.add_argument("--variants", type=_variants, default=d.variants,
                   help=f"comma list: unloaded, baseline and mappings with network fields (default "
                        f"{','.join(DEFAULT_VARIANTS)})")
    b.add_argument("--rate-mbit", type=positive_float, default=d.rate_mbit, help="bottleneck rate (default 1000)")
    b.add_argument("--qdisc", choices=QDISCS, default=d.qdisc, help="bottleneck qdisc (default htb)")
    b.add_argument("--classify", choices=CLASSIFY, default=d.classify,
                   help="how the HTB root finds a packet's class: its socket priority (default, SO_PRIORITY, "
                        "this host only) or its DSCP mark (IP_TOS, u32 filters: what survives between hosts)")
    b.add_argument("--rtt-ms", type=nonneg_float, default=d.rtt_ms,
                   help="round-trip delay added by netem on the return path (default 0; the host needs netem: the "
                        "guest lab's net kernel has it)")
    b.add_argument("--loss-pct", type=nonneg_float, default=d.loss_pct,
                   help="random loss on the data path, a netem leaf under each bottleneck class (default 0)")
    b.add_argument("--leaf", choices=LEAVES, default=d.leaf,
                   help="the queue under each bottleneck class: pfifo (the kernel's default) or fq, which enforces "
                        "the sockets' pacing rates instead of TCP's own pacing")
    b.add_argument("--sizes", type=_sizes, default=d.sizes, help="fetch sizes, e.g. 16K,64K,256K (the default)")
    b.add_argument("--step-ms", type=positive_float, default=d.step_ms, help="one fetch per decode step (default 10)")
    b.add_argument("--duration-s", type=positive_float, default=d.duration_s, help="fetching per repetition (4)")
    b.add_argument("--reps", type=positive_int, default=d.reps, help="repetitions per variant (default 5)")
    b.add_argument("--bulk-streams", type=positive_int, default=d.bulk_streams, help="bulk TCP streams (default 2)")
    b.add_argument("--no-anchor", action="store_true", help="skip the sockperf / iperf3 anchor")
    b.add_argument("--anchor-size", type=parse_size_arg, default=d.anchor_size,
                   help="ping-pong message size of the anchor (default 16K; at most 65000, sockperf's limit)")
    b.add_argument("--ebpf", action="store_true", help="per-class qdisc delay and retransmits from tracepoints")
    b.add_argument("--no-fetch-rt", action="store_true",
                   help="run the fetcher and its server at normal CPU priority (default: SCHED_FIFO, chrt -f 10, in "
                        "every variant: the lab's bulk endpoints copy through a veth on this host's CPUs, a NIC "
                        "would not, and that CPU contention is not what the mechanisms are measured against)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--verbose", action="store_true", help="print each command kvds starts")
    b.add_argument("--dry-run", action="store_true",
                   help="print the lab, the classes and every command a run would start; change nothing")
    add_json_flag(b)
    add_target_args(b)  # --target guest / ssh://...: harness/remote runs this same command there (the whole lab)
    # --target guest boots the net lab kernel (qemu_validation/guest_target.py)
    b.set_defaults(func=cmd_bench, guest_lab="net")


def parse_size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def config_from(args: argparse.Namespace) -> NetConfig:
    cfg = NetConfig(variants=args.variants, rate_mbit=args.rate_mbit, qdisc=args.qdisc, sizes=args.sizes,
                    step_ms=args.step_ms, duration_s=args.duration_s, reps=args.reps, bulk_streams=args.bulk_streams,
                    anchor=not args.no_anchor, anchor_size=args.anchor_size, ebpf=args.ebpf, seed=args.seed,
                    fetch_rt=not args.no_fetch_rt, rtt_ms=args.rtt_ms, loss_pct=args.loss_pct, leaf=args.leaf,
                    classify=args.classify,
                    verbose=args.verbose)
    cfg.check()
    return cfg


def cmd_bench(args: argparse.Namespace) -> int:
    from net_priority import bench_run, render

    cfg = config_from(args)
    bench_run.mappings_of(cfg)  # unknown mappings and impossible combinations: exit 2 before the root check
    if args.dry_run:
        from net_priority import dry_run

        emit(None, dry_run.plan(cfg).as_dict(), args.json, render.dry_run)
        return 0
    require_root("kvds net bench")
    out = bench_run.run(cfg, echo=say if cfg.verbose else None)
    emit(out.run, out.summary.as_dict(), args.json, lambda s: render.bench(s, out.run.run_id))
    say(f"results in {out.run.path}")
    return 0
