"""`kvds policy compare|sweep|bench|generate|import` and `kvds replay`."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.cli_args import add_json_flag, positive_int
from harness.errors import UserError
from harness.policy import options
from harness.policy.compare import build, check_seeds, render, run_matrix, summarize, table
from harness.policy.metrics import fmt
from harness.policy.registry import is_reference, parse_policies
from harness.progress import say
from harness.results import ResultStore, print_json
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

    b = verbs.add_parser("bench", help="events per second of the simulator on a generated trace")
    b.add_argument("--events", type=positive_int, default=1_000_000)
    b.add_argument("--policy", default="ExpectedNextUse")
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


def _add_trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", help="simulate this trace file instead of generating the profile: .npz (kvds), "
                                   "prototype JSONL, or a request CSV/JSONL (batched as --profile with each seed)")
    p.add_argument("--requests", help="request trace (CSV/JSONL) to batch with each seed (same as --trace)")
    p.add_argument("--step-ms", type=float, default=20.0, help="decode step length for request arrival times")


def _source(args: argparse.Namespace, profile, seeds: list[int]):
    """(trace_for_seed or None, seeds, description). A fixed trace file runs once: seeds cannot vary it."""
    path = args.trace or args.requests
    if not path:
        check_seeds(seeds)
        return None, seeds, f"profile {profile.name}"
    from harness.policy.importers import load_trace

    if not args.step_ms > 0:
        raise UserError("--step-ms must be positive")
    first = load_trace(path, profile, seeds[0], args.step_ms)  # a bad file fails (file:line) before any work
    if first.meta.get("source") != "request-trace":
        return (lambda seed: first), [seeds[0]], f"trace {path} (one fixed trace: no interval over seeds)"
    check_seeds(seeds)
    return (lambda seed: load_trace(path, profile, seed, args.step_ms)), seeds, \
        f"requests {path} batched as {profile.name}"


def _dicts(summary: dict) -> dict:
    return {p: {k: e.as_dict() for k, e in est.items()} for p, est in summary.items()}


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.policy.compare import versus, versus_table

    profile = options.profile_from_args(args)
    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    policies = parse_policies(args.policies)
    for spec in policies:
        build(spec)
    trace_for_seed, seeds, source = _source(args, profile, options.seeds_from_args(args.seeds))
    per_policy = run_matrix(profile, seeds, policies, cap, fast, slow, slow_bytes, trace_for_seed)
    summary = summarize(per_policy)
    vs = versus(per_policy)
    config = {"profile": profile.as_dict(), "trace": args.trace or args.requests, "seeds": seeds,
              "policies": policies, "capacity": cap.label(), "fast": fast.__dict__, "slow": slow.__dict__}
    run = ResultStore().new_run("policy-compare", config)
    run.write_json("per_seed", per_policy)
    run.write_summary({**_dicts(summary), "_versus_lru": _dicts(vs)})
    if args.json:
        print_json({"run": str(run.path), "summary": _dicts(summary), "versus_lru": _dicts(vs)})
        return 0
    print(f"{source}, {len(seeds)} seed(s), fast tier {cap.label()}; mean ±95% CI half-width over seeds; "
          f"miss columns per access (hi/mid/low = priority bands), SLO = share of request-steps within TPOT")
    print(table(summary))
    if vs:
        print()
        print(versus_table(vs))
    print(f"results: {run.path}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from harness.policy.compare import Capacity
    from harness.policy.metrics import METRICS
    from harness.policy.plots import sweep_png

    if args.metric not in METRICS:
        raise UserError(f"unknown metric {args.metric!r} (known: {', '.join(METRICS)})")
    profile = options.profile_from_args(args)
    fast, slow, _, slow_bytes = options.tiers_from_args(args)
    policies = parse_policies(args.policies)
    for spec in policies:
        build(spec)
    try:
        fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"--fractions {args.fractions!r}: expected comma-separated numbers") from None
    if not fractions or any(f <= 0 for f in fractions):
        raise UserError("--fractions must be positive numbers")
    trace_for_seed, seeds, source = _source(args, profile, options.seeds_from_args(args.seeds))
    results = {}
    for f in fractions:
        results[f] = summarize(run_matrix(profile, seeds, policies, Capacity(fraction=f), fast, slow, slow_bytes,
                                          trace_for_seed))
    run = ResultStore().new_run("policy-sweep", {"profile": profile.as_dict(), "trace": args.trace or args.requests,
                                                 "seeds": seeds, "fractions": fractions, "metric": args.metric,
                                                 "policies": policies})
    out = {str(f): {p: results[f][p][args.metric].as_dict() for p in policies} for f in fractions}
    run.write_summary(out)
    png = sweep_png({f: {p: results[f][p][args.metric] for p in policies} for f in fractions}, args.metric,
                    f"{args.metric} vs fast-tier size: {source}", run.path / "sweep.png")
    if args.json:
        print_json({"run": str(run.path), "metric": args.metric, "by_fraction": out, "png": str(png)})
        return 0
    print(f"{args.metric} on {source}, {len(seeds)} seed(s); columns: fast tier as a fraction of peak live KV; "
          f"mean ±95% CI half-width")
    rows = [[p + (" (offline bound)" if is_reference(p.split(":")[0]) else "")]
            + [fmt(results[f][p][args.metric]) for f in fractions] for p in policies]
    print(render(["policy"] + [f"{f:g}x" for f in fractions], rows))
    print(f"figure: {png}")
    print(f"results: {run.path}")
    return 0


def cmd_goals(args: argparse.Namespace) -> int:
    from harness.policy import goals as g
    from harness.policy.compare import summarize as summ

    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    seeds = options.seeds_from_args(args.seeds)
    check_seeds(seeds)
    profiles = list(g.PROFILES) if args.profiles == "all" else [p.strip() for p in args.profiles.split(",")]
    from harness.policy.profiles import get_profile

    per_profile = {p: run_matrix(get_profile(p), seeds, list(g.POLICIES), cap, fast, slow, slow_bytes)
                   for p in profiles}
    verdicts = [(goal, g.judge(goal, per_profile[goal.profile])) for goal in g.GOALS if goal.profile in per_profile]
    run = ResultStore().new_run("policy-goals", {"seeds": seeds, "profiles": profiles, "capacity": cap.label(),
                                                 "policies": list(g.POLICIES)})
    run.write_json("per_seed", per_profile)
    result = [{"profile": goal.profile, "policy": goal.policy, **v.as_dict()} for goal, v in verdicts]
    run.write_summary({"verdicts": result,
                       "summary": {p: _dicts(summ(per)) for p, per in per_profile.items()}})
    if args.json:
        print_json({"run": str(run.path), "verdicts": result})
        return 0
    if args.tables:
        from harness.policy.compare import versus, versus_table

        for p, per in per_profile.items():
            print(f"profile {p}, seeds {','.join(map(str, seeds))}, fast tier {cap.label()}; mean ±95% CI half-width")
            print(table(summ(per)))
            print(versus_table(versus(per)))
            print()
    print(f"{len(seeds)} seeds, fast tier {cap.label()}, prefetch and spills charged to the I/O budget; "
          f"verdicts from the whole 95% interval (paired over seeds against LRU)")
    print(render(["profile", "policy", "verdict"],
                 [[goal.profile, goal.policy + (" (offline bound: feasibility)" if goal.policy == g.PRIO_BOUND else ""),
                   str(v)] for goal, v in verdicts]))
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
          f"{args.repeat} runs = {out['events_per_s']:,.0f} events per CPU second on one core "
          f"(target {out['target_events_per_s']:,}: {'met' if out['meets_target'] else 'MISSED'})")
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
