"""`kvds policy compare|sweep|goals|speed|generate|import` and `kvds replay`: arguments only. Each verb builds one
config and hands it to its module (compare_run, sweep_run, goals_run, speed, trace_run, replay_run); the module
files the run and returns a typed summary, printed by `harness.emit` (--json) or by render.py."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli_args import add_json_flag, positive_int
from harness.emit import emit
from harness.errors import UserError
from harness.paths import work_dir
from kv_policy import options, render
from kv_policy.registry import parse_policies

if TYPE_CHECKING:
    from kv_policy.compare_run import CompareConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="simulate KV placement policies over generated or imported traces")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    verbs.required = True

    c = verbs.add_parser("compare", help="all policies on one profile, over several seeds, with 95%% CIs")
    options.add_profile_args(c)
    options.add_tier_args(c)
    c.add_argument("--seeds", default="5", help="seed count (>= 5), comma list or ranges (200-219)")
    c.add_argument("--policies", default="all",
                   help="comma list or 'all'; a policy may carry parameters, e.g. ExpectedNextUse:priority_weight=1.5")
    _add_trace_args(c)
    add_json_flag(c)
    c.set_defaults(func=cmd_compare)

    s = verbs.add_parser("sweep", help="one metric across fast-tier sizes, per policy, over seeds")
    options.add_profile_args(s)
    options.add_tier_args(s)
    s.add_argument("--fractions", default="0.25,0.5,0.75", help="fast-tier fractions of peak live KV bytes")
    s.add_argument("--metric", default="dc_miss_ratio", help="metric to tabulate (see README.md)")
    s.add_argument("--seeds", default="5", help="seed count (>= 5), comma list or ranges (200-219)")
    s.add_argument("--policies", default="all")
    _add_trace_args(s)
    add_json_flag(s)
    s.set_defaults(func=cmd_sweep)

    o = verbs.add_parser("goals", help="issue 14's goals on all five profiles: verdicts with 95%% intervals")
    o.add_argument("--seeds", default="5", help="seed count (>= 5), comma list or ranges (200-219)")
    o.add_argument("--profiles", default="all", help="comma list or 'all'")
    o.add_argument("--tables", action="store_true",
                   help="also print each profile's compare table (the same rows `policy compare` prints)")
    options.add_tier_args(o)
    add_json_flag(o)
    o.set_defaults(func=cmd_goals)

    # `bench` is the verb's name before issue 17 (kept as an alias; "bench" elsewhere means a latency measurement)
    b = verbs.add_parser("speed", aliases=["bench"],
                         help="the simulator's events per second on a generated trace (alias: bench)")
    b.add_argument("--events", type=positive_int, default=1_000_000)
    b.add_argument("--policy", default="ExpectedNextUse")
    b.add_argument("--profile", default="balanced")
    b.add_argument("--fast-fraction", type=float, default=0.5)
    b.add_argument("--repeat", type=positive_int, default=3, help="timed repetitions (median reported)")
    add_json_flag(b)
    b.set_defaults(func=cmd_speed)

    g = verbs.add_parser("generate", help="write a generated trace (.npz)")
    options.add_profile_args(g)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--events", type=positive_int, help="stop at this many events (adds requests as needed)")
    g.add_argument("--out", required=True)
    add_json_flag(g)
    g.set_defaults(func=cmd_generate)

    i = verbs.add_parser("import", help="convert a prototype JSONL or a request trace to a kvds trace (.npz)")
    i.add_argument("--format", choices=("prototype", "requests"), required=True)
    i.add_argument("--in", dest="inp", required=True)
    i.add_argument("--out", required=True)
    options.add_profile_args(i)
    i.add_argument("--seed", type=int, default=0, help="batching seed for request traces")
    i.add_argument("--step-ms", type=float, default=20.0, help="decode step length for request arrival times")
    add_json_flag(i)
    i.set_defaults(func=cmd_import)

    _register_replay(sub)
    register_crosscheck(verbs)


def _register_replay(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="execute policies' decisions as real memory and O_DIRECT I/O; "
                                      "simulated vs measured latency")
    p.add_argument("--trace", required=True, help=".npz (kvds), prototype JSONL, or request CSV/JSONL")
    p.add_argument("--policy", default="all", help="policy, comma list, or 'all'")
    options.add_tier_args(p)
    p.add_argument("--work-dir", type=Path, help=f"directory for the loop device's backing file "
                                               f"(default {work_dir()})")
    p.add_argument("--mapping", default="intent", help="intent->mechanism mapping supplying the ioprio classes")
    p.add_argument("--scheduler", default="mq-deadline",
                   help="I/O scheduler for the kvds loop device ('keep' leaves it unchanged)")
    p.add_argument("--reps", type=positive_int, default=1, help="replays per policy (alternating order)")
    p.add_argument("--max-steps", type=positive_int, help="replay only the first N steps of the trace")
    p.add_argument("--seed", type=int, default=0, help="batching seed when --trace is a request trace")
    add_json_flag(p)
    p.set_defaults(func=cmd_replay)


def _add_trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", help="simulate this trace file instead of generating the profile: .npz (kvds), "
                                   "prototype JSONL, or a request CSV/JSONL (batched as --profile with each seed)")
    p.add_argument("--requests", help="request trace (CSV/JSONL) to batch with each seed (same as --trace)")
    p.add_argument("--step-ms", type=float, default=20.0, help="decode step length for request arrival times")


def _compare_config(args: argparse.Namespace) -> "CompareConfig":
    from kv_policy.compare_run import CompareConfig

    profile = options.profile_from_args(args)
    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    return CompareConfig(profile, options.seeds_from_args(args.seeds), parse_policies(args.policies), fast, slow, cap,
                         slow_bytes, args.trace or args.requests, args.step_ms)


def cmd_compare(args: argparse.Namespace) -> int:
    from kv_policy.compare_run import compare

    cfg = _compare_config(args)
    out = compare(cfg)
    emit(out.run, out.summary.as_dict(), args.json, lambda _: render.compare(out, cfg.cap.label()))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from kv_policy.sweep_run import SweepConfig, sweep

    cfg = _compare_config(args)
    try:
        fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"--fractions {args.fractions!r}: expected comma-separated numbers") from None
    out = sweep(SweepConfig(cfg, fractions, args.metric))
    emit(out.run, out.summary.as_dict(), args.json, lambda _: render.sweep(out))
    return 0


def cmd_goals(args: argparse.Namespace) -> int:
    from kv_policy import goals as g
    from kv_policy.goals_run import GoalsConfig, goals

    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    seeds = options.seeds_from_args(args.seeds)
    profiles = list(g.PROFILES) if args.profiles == "all" else [p.strip() for p in args.profiles.split(",")]
    out = goals(GoalsConfig(seeds, profiles, fast, slow, cap, slow_bytes))
    emit(out.run, out.summary.as_dict(), args.json, lambda _: render.goals(out, args.tables))
    return 0


def cmd_speed(args: argparse.Namespace) -> int:
    from kv_policy.speed import SpeedConfig, speed

    out = speed(SpeedConfig(args.events, args.policy, args.profile, args.fast_fraction, args.repeat))
    emit(None, out.as_dict(), args.json, lambda _: render.speed(out))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from kv_policy.trace_run import GenerateConfig, generate

    out = generate(GenerateConfig(options.profile_from_args(args), args.seed, args.events, args.out))
    emit(None, out.as_dict(), args.json, lambda _: render.trace(out))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from kv_policy.trace_run import ImportConfig, import_trace

    profile = options.profile_from_args(args) if args.format == "requests" else None
    out = import_trace(ImportConfig(args.format, args.inp, args.out, profile, args.seed, args.step_ms))
    emit(None, out.as_dict(), args.json, lambda _: render.trace(out))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from kv_policy.replay_run import ReplayConfig, replay

    policies = parse_policies(args.policy)
    fast, slow, cap, _ = options.tiers_from_args(args)
    out = replay(ReplayConfig(args.trace, policies, fast, slow, cap, args.work_dir, args.mapping, args.scheduler,
                              args.reps, args.max_steps, args.seed))
    emit(out.run, out.summary.as_dict(), args.json, lambda _: render.replay(out))
    return 0


def register_crosscheck(verbs: argparse._SubParsersAction) -> None:
    """`kvds policy crosscheck` in the one run shape (harness/verbs.py)."""
    from harness.verbs import Verb, add
    from kv_policy import crosscheck_run

    def arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--trace", help="Mooncake-format JSONL (every request's hash_ids in arrival order) or a kvds "
                                       ".npz (its accessed blocks); default: a generated Zipf sequence")
        p.add_argument("--capacities", default=",".join(f"{c:g}" for c in crosscheck_run.DEFAULT_CAPACITIES),
                       help="cache sizes as shares of the sequence's unique blocks (comma list, each in (0, 1])")

    def config(args: argparse.Namespace) -> crosscheck_run.CrosscheckConfig:
        try:
            caps = tuple(float(c) for c in args.capacities.split(",") if c.strip())
        except ValueError:
            raise UserError(f"--capacities {args.capacities!r}: expected comma-separated numbers") from None
        if not caps or not all(0.0 < c <= 1.0 for c in caps):
            raise UserError(f"--capacities {args.capacities!r}: each share must be in (0, 1]")
        if args.trace is not None and not Path(args.trace).is_file():
            raise UserError(f"--trace {args.trace}: no such file")
        return crosscheck_run.CrosscheckConfig(args.trace, caps)

    add(verbs, Verb("crosscheck", "kvds's LRU, ARC, S3-FIFO and MIN against libCacheSim's on a plain block sequence",
                    arguments, config, crosscheck_run.run, render.crosscheck, crosscheck_run.CrosscheckSummary))
