"""`kvds policy compare|sweep|gap|goals|speed|generate|import|replay`: arguments and input checks only. Each verb is a
harness.verbs.Verb: `config(args)` builds its typed config (bad input: one line, exit 2; a missing mechanism:
the doctor's reason, before anything changes), `<verb>_run.run(cfg)` does the work, render.<verb> prints it."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import verbs
from harness.cli_args import positive_int, require_root
from harness.errors import UserError
from harness.paths import work_dir
from kv_policy import (compare_run, crosscheck_run, gap_run, generate_run, goals_run, import_run, options, render,
                       replay_run, speed_run, sweep_run)
from kv_policy.goals import CONTENDER
from kv_policy.importers import FORMATS, SHIPPED, TraceOptions
from kv_policy.registry import parse_policies

SEEDS_HELP = ("seed count (>= 5; 1 for a point estimate, e.g. a timing run; goals need 5), comma list or ranges "
              "(200-219); on a serving trace, one priority assignment each")


def _trace_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--trace", required=required,
                   help="simulate this trace file instead of generating the profile: .npz (kvds), prototype JSONL, "
                        "a request CSV/JSONL (batched as --profile with each seed), a Mooncake JSONL or an Azure "
                        f"CSV (priorities assigned by kvds per seed), or a shipped slice: {', '.join(SHIPPED)}")
    p.add_argument("--format", default="auto", choices=FORMATS, help="the trace's format (default: by content)")
    p.add_argument("--window", metavar="START:END", help="serving traces: only requests arriving within these "
                                                         "seconds of trace time")
    p.add_argument("--max-requests", type=positive_int, help="serving traces: the first N requests (of the window)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="serving traces: arrival times divided by this (2 = twice the arrival rate)")
    p.add_argument("--step-ms", type=float, default=20.0, help="decode step length for request arrival times")


def _window(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    lo, sep, hi = text.partition(":")
    try:
        start, end = float(lo), float(hi)
    except ValueError:
        raise UserError(f"--window {text!r}: expected START:END in seconds (e.g. 0:600)") from None
    if not sep or not 0 <= start < end:
        raise UserError(f"--window {text!r}: need 0 <= START < END")
    return start, end


def trace_options(args: argparse.Namespace) -> TraceOptions | None:
    path = getattr(args, "trace", None) or getattr(args, "requests", None)
    if not path:
        return None
    if not args.step_ms > 0:
        raise UserError("--step-ms must be positive")
    if not args.time_scale > 0:
        raise UserError("--time-scale must be positive")
    opts = TraceOptions(path, args.format, _window(args.window), args.max_requests, args.time_scale, args.step_ms)
    opts.kind()  # a missing file fails here, before any work
    return opts


def _compare_args(p: argparse.ArgumentParser) -> None:
    options.add_profile_args(p)
    options.add_tier_args(p)
    p.add_argument("--seeds", default="5", help=SEEDS_HELP)
    p.add_argument("--policies", default="all",
                   help="comma list or 'all'; a policy may carry parameters, e.g. ExpectedNextUse:priority_weight=1.5")
    _trace_args(p)
    p.add_argument("--requests", help="request trace (CSV/JSONL) to batch with each seed (same as --trace)")
    p.add_argument("--jobs", type=int, default=0,
                   help="worker processes running a seed's policies side by side (default 0: one per available "
                        "CPU on a trace of a million events or more, else 1)")


def compare_config(args: argparse.Namespace) -> compare_run.CompareConfig:
    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    if args.jobs < 0:
        raise UserError(f"--jobs {args.jobs}: a count of worker processes (0 = one per available CPU)")
    return compare_run.CompareConfig(options.profile_from_args(args), options.seeds_from_args(args.seeds),
                                     parse_policies(args.policies), fast, slow, cap, slow_bytes, trace_options(args),
                                     args.jobs)


def _sweep_args(p: argparse.ArgumentParser) -> None:
    _compare_args(p)
    p.add_argument("--fractions", default="0.25,0.5,0.75", help="fast-tier fractions of peak live KV bytes")
    p.add_argument("--metric", default="dc_miss_ratio", help="metric to tabulate (see README.md)")


def sweep_config(args: argparse.Namespace) -> sweep_run.SweepConfig:
    try:
        fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"--fractions {args.fractions!r}: expected comma-separated numbers") from None
    return sweep_run.SweepConfig(compare_config(args), fractions, args.metric)


def _goals_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", default="5", help=SEEDS_HELP)
    p.add_argument("--profiles", default="all", help="comma list or 'all'")
    p.add_argument("--profile", default="balanced",
                   help="with --trace: the profile whose tenant classes a serving trace's priorities are drawn from")
    p.add_argument("--tables", action="store_true",
                   help="also print each profile's compare table (the same rows `policy compare` prints)")
    options.add_tier_args(p)
    _trace_args(p)


def goals_config(args: argparse.Namespace) -> goals_run.GoalsConfig:
    from kv_policy import goals as g
    from kv_policy.profiles import get_profile

    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    profiles = list(g.PROFILES) if args.profiles == "all" else [p.strip() for p in args.profiles.split(",")]
    for p in profiles:
        get_profile(p)
    return goals_run.GoalsConfig(options.seeds_from_args(args.seeds), profiles, fast, slow, cap, slow_bytes,
                                 trace_options(args), get_profile(args.profile), args.tables)


def _generate_args(p: argparse.ArgumentParser) -> None:
    options.add_profile_args(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--events", type=positive_int, help="stop at this many events (adds requests as needed)")
    p.add_argument("--out", required=True)


def generate_config(args: argparse.Namespace) -> generate_run.GenerateConfig:
    return generate_run.GenerateConfig(options.profile_from_args(args), args.seed, args.events, args.out)


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in", dest="inp", help="the file to convert (or use --trace)")
    _trace_args(p)
    p.add_argument("--out", required=True)
    options.add_profile_args(p)
    p.add_argument("--seed", type=int, default=0, help="batching seed; a serving trace's priority assignment")


def import_config(args: argparse.Namespace) -> import_run.ImportConfig:
    args.trace = args.trace or args.inp
    if not args.trace:
        raise UserError("kvds policy import: give the file with --in FILE (or --trace FILE)")
    if args.format == "requests" and args.trace.endswith(".npz"):
        raise UserError(f"{args.trace}: a .npz is already a kvds trace")
    return import_run.ImportConfig(trace_options(args), args.out, options.profile_from_args(args), args.seed)


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default="all", help="policy, comma list, or 'all'")
    options.add_tier_args(p)
    p.add_argument("--work-dir", type=Path, help=f"directory for the loop device's backing file "
                                               f"(default {work_dir()})")
    p.add_argument("--mapping", default="intent", help="intent->mechanism mapping supplying the ioprio classes")
    p.add_argument("--scheduler", default="mq-deadline",
                   help="I/O scheduler for the kvds loop device ('keep' leaves it unchanged)")
    p.add_argument("--reps", type=positive_int, default=1, help="replays per policy (alternating order)")
    p.add_argument("--max-steps", type=positive_int, help="replay only the first N steps of the trace")
    p.add_argument("--seed", type=int, default=0, help="batching seed (a serving trace: the priority assignment)")
    _trace_args(p, required=True)


def replay_config(args: argparse.Namespace) -> replay_run.ReplayConfig:
    policies = parse_policies(args.policy)
    fast, slow, cap, _ = options.tiers_from_args(args)
    trace = trace_options(args)
    if args.work_dir is not None and not args.work_dir.is_dir():
        raise UserError(f"--work-dir {str(args.work_dir)!r} is not a directory")
    require_root("kvds policy replay")
    return replay_run.ReplayConfig(trace, policies, fast, slow, cap, args.work_dir, args.mapping, args.scheduler,
                                   args.reps, args.max_steps, args.seed)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="simulate KV placement policies over generated or imported traces")
    sub_verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    sub_verbs.required = True
    for verb in VERBS:
        verbs.add(sub_verbs, verb)
    # `bench` is the verb's name before the one run shape (kept as an alias)
    verbs.add(sub_verbs, SPEED, aliases=["bench"])


def _speed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--events", type=positive_int, default=1_000_000)
    p.add_argument("--policy", default="ExpectedNextUse")
    p.add_argument("--profile", default="balanced")
    p.add_argument("--fast-fraction", type=float, default=0.5)
    p.add_argument("--repeat", type=positive_int, default=3, help="timed repetitions (median reported)")


def speed_config(args: argparse.Namespace) -> speed_run.SpeedConfig:
    return speed_run.SpeedConfig(args.events, args.policy, args.profile, args.fast_fraction, args.repeat)


def crosscheck_config(args: argparse.Namespace) -> crosscheck_run.CrosscheckConfig:
    try:
        caps = tuple(float(c) for c in args.capacities.split(",") if c.strip())
    except ValueError:
        raise UserError(f"--capacities {args.capacities!r}: expected comma-separated numbers") from None
    if not caps or not all(0.0 < c <= 1.0 for c in caps):
        raise UserError(f"--capacities {args.capacities!r}: each share must be in (0, 1]")
    if args.trace is not None and not Path(args.trace).is_file():
        raise UserError(f"--trace {args.trace}: no such file")
    return crosscheck_run.CrosscheckConfig(args.trace, caps)


def _crosscheck_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", help="Mooncake-format JSONL (every request's hash_ids in arrival order) or a kvds "
                                   ".npz (its accessed blocks); default: a generated Zipf sequence")
    p.add_argument("--capacities", default=",".join(f"{c:g}" for c in crosscheck_run.DEFAULT_CAPACITIES),
                   help="cache sizes as shares of the sequence's unique blocks (comma list, each in (0, 1])")


def _gap_args(p: argparse.ArgumentParser) -> None:
    options.add_profile_args(p)
    options.add_tier_args(p)
    p.add_argument("--seeds", default="5", help=SEEDS_HELP)
    p.add_argument("--policy", default=CONTENDER, help="the online policy whose misses beyond MIN are located")
    p.add_argument("--reference", default="vLLM-prefix", help="a second online row counted beside it")
    _trace_args(p)


def gap_config(args: argparse.Namespace) -> gap_run.GapConfig:
    fast, slow, cap, slow_bytes = options.tiers_from_args(args)
    policy, reference = parse_policies(args.policy), parse_policies(args.reference)
    if len(policy) != 1 or len(reference) != 1:
        raise UserError("--policy and --reference name one policy each")
    return gap_run.GapConfig(options.profile_from_args(args), options.seeds_from_args(args.seeds), policy[0],
                             reference[0], fast, slow, cap, slow_bytes, trace_options(args))


VERBS = (
    verbs.Verb("compare", "all policies on one profile or trace, over several seeds, with 95%% CIs", _compare_args,
               compare_config, compare_run.run, render.compare, compare_run.CompareSummary),
    verbs.Verb("sweep", "one metric across fast-tier sizes, per policy, over seeds", _sweep_args, sweep_config,
               sweep_run.run, render.sweep, sweep_run.SweepSummary),
    verbs.Verb("gap", "where an online policy's decode-critical misses exceed MIN's, by what the engine knows",
               _gap_args, gap_config, gap_run.run, render.gap, gap_run.GapSummary),
    verbs.Verb("goals", "the track's goals on all five profiles (or one trace): verdicts with 95%% intervals",
               _goals_args, goals_config, goals_run.run, render.goals, goals_run.GoalsSummary),
    verbs.Verb("generate", "write a generated trace (.npz)", _generate_args, generate_config, generate_run.run,
               render.generate, generate_run.GenerateSummary),
    verbs.Verb("import", "convert a prototype JSONL, a request trace, or a Mooncake / Azure serving trace to a kvds "
                         "trace (.npz)", _import_args, import_config, import_run.run, render.import_,
               import_run.ImportSummary),
    verbs.Verb("replay", "execute policies' decisions as real memory and O_DIRECT I/O; simulated vs measured latency",
               _replay_args, replay_config, replay_run.run, render.replay, replay_run.ReplaySummary),
    verbs.Verb("crosscheck", "kvds's LRU, ARC, S3-FIFO and MIN against libCacheSim's on a plain block sequence",
               _crosscheck_args, crosscheck_config, crosscheck_run.run, render.crosscheck,
               crosscheck_run.CrosscheckSummary),
)
SPEED = verbs.Verb("speed", "the simulator's events per second on a generated trace, beside libCacheSim (alias: bench)",
                   _speed_args, speed_config, speed_run.run, render.speed, speed_run.SpeedSummary)
