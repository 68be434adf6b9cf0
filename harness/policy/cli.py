"""`kvds policy compare|sweep|bench|generate|import` and `kvds replay`."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.cli import add_json_flag, positive_int
from harness.errors import UserError
from harness.policy import options
from harness.policy.compare import check_seeds, render, run_matrix, summarize, table
from harness.policy.metrics import fmt
from harness.policy.policies import parse_policies
from harness.progress import say
from harness.results import ResultStore
from harness.results import dumps as strict_dumps

if TYPE_CHECKING:
    from pathlib import Path

    from harness.policy.trace import Trace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="simulate KV placement policies over generated or imported traces")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    verbs.required = True

    c = verbs.add_parser("compare", help="all policies on one profile, over several seeds, with 95%% CIs")
    options.add_profile_args(c)
    options.add_tier_args(c)
    c.add_argument("--seeds", default="5", help="seed count (>= 5) or comma list")
    c.add_argument("--policies", default="all", help="comma list or 'all'")
    c.add_argument("--requests", help="request trace (CSV/JSONL) to batch with each seed instead of generating "
                                      "the profile's requests (the profile still sets batching and attention)")
    c.add_argument("--step-ms", type=float, default=20.0, help="decode step length for --requests arrivals")
    add_json_flag(c)
    c.set_defaults(func=cmd_compare)

    s = verbs.add_parser("sweep", help="one metric across fast-tier sizes, per policy, over seeds")
    options.add_profile_args(s)
    options.add_tier_args(s)
    s.add_argument("--fractions", default="0.25,0.5,0.75", help="fast-tier fractions of peak live KV bytes")
    s.add_argument("--metric", default="dc_miss_ratio", help="metric to tabulate (see README.md)")
    s.add_argument("--seeds", default="5")
    s.add_argument("--policies", default="all")
    add_json_flag(s)
    s.set_defaults(func=cmd_sweep)

    b = verbs.add_parser("bench", help="events per second of the simulator on a generated trace")
    b.add_argument("--events", type=positive_int, default=1_000_000)
    b.add_argument("--policy", default="DeadlineAware")
    b.add_argument("--profile", default="balanced")
    b.add_argument("--fast-fraction", type=float, default=0.5)
    b.add_argument("--repeat", type=positive_int, default=3, help="timed repetitions (median reported)")
    add_json_flag(b)
    b.set_defaults(func=cmd_bench)

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

    from harness.policy import replay_cli

    replay_cli.register(sub)


def cmd_compare(args: argparse.Namespace) -> int:
    profile = options.profile_from_args(args)
    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    seeds = options.seeds_from_args(args.seeds)
    check_seeds(seeds)
    policies = parse_policies(args.policies)
    trace_for_seed = None
    if args.requests:
        from harness.policy.importers import import_requests

        if not args.step_ms > 0:
            raise UserError("--step-ms must be positive")
        import_requests(args.requests, profile, seeds[0], args.step_ms)  # bad rows fail before any work
        trace_for_seed = lambda seed: import_requests(args.requests, profile, seed, args.step_ms)  # noqa: E731
    per_policy = run_matrix(profile, seeds, policies, cap, fast, slow, slow_bytes, trace_for_seed)
    summary = summarize(per_policy)
    config = {"profile": profile.as_dict(), "requests": args.requests, "seeds": seeds, "policies": policies, "capacity": cap.label(),
              "fast": fast.__dict__, "slow": slow.__dict__}
    run = ResultStore().new_run("policy-compare", config)
    run.write_json("per_seed", per_policy)
    run.write_summary({p: {k: e.as_dict() for k, e in est.items()} for p, est in summary.items()})
    if args.json:
        print(strict_dumps({"run": str(run.path), "summary": {p: {k: e.as_dict() for k, e in est.items()}
                                                            for p, est in summary.items()}}, indent=2))
        return 0
    source = f"requests {args.requests} batched as {profile.name}" if args.requests else f"profile {profile.name}"
    print(f"{source}, {len(seeds)} seeds, fast tier {cap.label()}; mean ±95% CI half-width")
    print(table(summary))
    print(f"results: {run.path}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from harness.policy.compare import Capacity
    from harness.policy.metrics import METRICS

    if args.metric not in METRICS:
        raise UserError(f"unknown metric {args.metric!r} (known: {', '.join(METRICS)})")
    profile = options.profile_from_args(args)
    fast, slow, _, slow_bytes = options.tiers_from_args(args)
    seeds = options.seeds_from_args(args.seeds)
    check_seeds(seeds)
    policies = parse_policies(args.policies)
    try:
        fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"--fractions {args.fractions!r}: expected comma-separated numbers") from None
    if not fractions or any(f <= 0 for f in fractions):
        raise UserError("--fractions must be positive numbers")
    results = {}
    for f in fractions:
        results[f] = summarize(run_matrix(profile, seeds, policies, Capacity(fraction=f), fast, slow, slow_bytes))
    run = ResultStore().new_run("policy-sweep", {"profile": profile.as_dict(), "seeds": seeds,
                                                 "fractions": fractions, "metric": args.metric})
    out = {str(f): {p: results[f][p][args.metric].as_dict() for p in policies} for f in fractions}
    run.write_summary(out)
    if args.json:
        print(strict_dumps({"run": str(run.path), "metric": args.metric, "by_fraction": out}, indent=2))
        return 0
    print(f"{args.metric} on {profile.name}, {len(seeds)} seeds; columns: fast tier as a fraction of peak live KV")
    print(render(["policy"] + [f"{f:g}x" for f in fractions],
                 [[p] + [fmt(results[f][p][args.metric]) for f in fractions] for p in policies]))
    print(f"results: {run.path}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from harness.policy.bench import bench

    out = bench(args.events, args.policy, args.profile, args.fast_fraction, args.repeat)
    if args.json:
        print(strict_dumps(out, indent=2))
        return 0
    print(f"generated {out['events']} events ({out['blocks']} blocks, peak {out['peak_live_blocks']} live) "
          f"in {out['generate_cpu_s']:.2f} CPU s")
    print(f"{out['policy']}: median {out['simulate_cpu_s']:.2f} CPU s ({out['simulate_wall_s']:.2f} s wall) over "
          f"{args.repeat} runs = {out['events_per_s']:,.0f} events per CPU second on one core")
    print("cost per event against peak live blocks (CPU time):")
    for row in out["scaling"]:
        print(f"  ~{row['peak_live_blocks']:>6} live blocks: {row['ns_per_event']:.0f} ns/event")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from harness.policy.generator import generate
    from harness.policy.trace import save

    profile = options.profile_from_args(args)
    trace = generate(profile, args.seed, args.events)
    path = save(trace, args.out)
    return _report_trace(args, trace, path)


def cmd_import(args: argparse.Namespace) -> int:
    from harness.policy.importers import import_prototype, import_requests
    from harness.policy.trace import save

    if args.format == "prototype":
        trace = import_prototype(args.inp)
    else:
        if not args.step_ms > 0:
            raise UserError("--step-ms must be positive")
        trace = import_requests(args.inp, options.profile_from_args(args), args.seed, args.step_ms)
    path = save(trace, args.out)
    return _report_trace(args, trace, path)


def _report_trace(args: argparse.Namespace, trace: "Trace", path: "Path") -> int:
    """Print what was written: event counts and the peak live KV bytes."""
    counts = trace.counts()
    counts["peak_live_bytes"] = trace.peak_live_bytes()
    if args.json:
        print(strict_dumps({"path": str(path), **counts}, indent=2))
    else:
        say(f"wrote {path}")
        print(", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0
