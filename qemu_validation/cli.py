"""`kvds qemu VERB`: the guest lab's command line, in the one run shape (harness/verbs.py). Argument handling only:
each verb's `config` turns its arguments into the config dataclass of its `<verb>_run` module (bad input is a
UserError here, before anything changes), `<verb>_run.run` does the work and returns its typed summary, render.py
prints it and harness/emit.py prints it with --json.

`kvds qemu build --list` and `--prune` are aliases of the verbs `build-list` and `build-prune`: the build parser
hands them to those verbs, so both spellings run the same code and print the same summary."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import environment, verbs
from harness.cli_args import nonneg_int, positive_float, positive_int
from harness.errors import UserError
from qemu_validation import (build_list_run, build_prune_run, build_run, exit_bench_run, rebuild_time_run,
                             reclaim_bench_run, render, run_run, validate_run)
from qemu_validation.boot import kernel_args
from qemu_validation.kernel import build


def _build_args(p: argparse.ArgumentParser) -> None:
    kernel_args.add_spec_args(p)
    p.add_argument("--kasan", action="store_true", help="debug kernel: KASAN + lockdep (what validate uses)")
    p.add_argument("--jobs", type=positive_int, default=None, help="make -j (default: all CPUs)")
    p.add_argument("--list", action="store_true", help="the same as `kvds qemu build-list`")
    p.add_argument("--prune", action="store_true", help="the same as `kvds qemu build-prune`")
    p.add_argument("--dry-run", action="store_true", help="with --prune: say what would go, delete nothing")


def _build_config(args: argparse.Namespace) -> build_run.BuildConfig:
    return build_run.BuildConfig(spec=kernel_args.spec_of(args, args.kasan), jobs=args.jobs)


def _build_list_config(args: argparse.Namespace) -> build_list_run.BuildListConfig:
    return build_list_run.BuildListConfig()


def _build_prune_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")


def _build_prune_config(args: argparse.Namespace) -> build_prune_run.BuildPruneConfig:
    return build_prune_run.BuildPruneConfig(dry_run=args.dry_run)


def _icount_shift(text: str) -> int:
    try:
        return environment.icount_shift(text)
    except ValueError as exc:  # argparse prints only an ArgumentTypeError's own words
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run_args(r: argparse.ArgumentParser) -> None:
    r.add_argument("--kernel", metavar="ID", help="build id, id prefix or label (default: the mm_intent debug kernel)")
    r.add_argument("--share", type=Path, metavar="DIR", help="host directory mounted read-write at /share")
    r.add_argument("--host-root", action="store_true", help="chroot into the host's root (9p, read-only) to run CMD")
    r.add_argument("--timeout", type=positive_float, default=600.0, help="seconds before a hung guest is killed")
    r.add_argument("--memory", type=positive_int, default=1024, help="guest memory in MiB")
    r.add_argument("--cpus", type=positive_int, default=1)
    r.add_argument("--append", action="append", default=[], metavar="ARG", help="extra kernel command-line word")
    r.add_argument("--icount", type=_icount_shift, metavar="SHIFT",
                   help="instruction-count time: each guest instruction 2^SHIFT ns (0-10), no host stall in guest time")
    r.add_argument("--dry-run", action="store_true", help="print the QEMU command line that would run; run nothing")
    r.add_argument("--verbose", action="store_true", help="print the QEMU command line before it runs (on stderr)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")


def _run_config(args: argparse.Namespace) -> run_run.RunConfig:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("qemu run: no command given (kvds qemu run -- CMD...)")
    if any(" " in a or not a for a in args.append):
        raise UserError("--append takes one kernel command-line word")
    return run_run.RunConfig(command=tuple(command), kernel=args.kernel, share=args.share, host_root=args.host_root,
                             timeout=args.timeout, memory_mb=args.memory, cpus=args.cpus, append=tuple(args.append),
                             icount_shift=args.icount, verbose=args.verbose)


def _profile_args(p: argparse.ArgumentParser) -> None:
    q = validate_run.PROFILES["quick"]
    p.add_argument("--quick", action="store_true",
                   help=f"the edit loop: every check with {q.fuzz:,} malformed + {q.valid:,} well-formed lines and "
                        f"a {q.concurrent} s concurrent phase (not the gate: the full profile is)")


def _validate_args(v: argparse.ArgumentParser) -> None:
    v.add_argument("--kernel", metavar="ID", help="validate this build instead of building the debug kernel")
    kernel_args.add_spec_args(v)
    _profile_args(v)
    quick = validate_run.PROFILES["quick"]
    v.add_argument("--fuzz", type=nonneg_int, default=None,
                   help=f"random malformed writes (full: {validate_run.MIN_MALFORMED}, quick: {quick.fuzz})")
    v.add_argument("--valid", type=nonneg_int, default=None,
                   help=f"random well-formed writes (full: {validate_run.MIN_VALID}, quick: {quick.valid})")
    v.add_argument("--concurrent", type=nonneg_int, default=None, metavar="SECONDS",
                   help="seconds of register/clear/lookup racing process exit, exec and munmap (full: "
                        f"{validate_run.MIN_CONCURRENT_S}, quick: {quick.concurrent})")
    v.add_argument("--seed", type=positive_int, default=None,
                   help="seed of the random lines (default: a fresh one, printed; pass it back to reproduce)")
    v.add_argument("--timeout", type=positive_float, default=900.0)


def _counts(args: argparse.Namespace) -> tuple[int, int, int]:
    """fuzz, valid, concurrent: the profile's, each overridden by its flag when given."""
    prof = validate_run.PROFILES["quick" if args.quick else "full"]
    return (prof.fuzz if args.fuzz is None else args.fuzz, prof.valid if args.valid is None else args.valid,
            prof.concurrent if args.concurrent is None else args.concurrent)


def _validate_config(args: argparse.Namespace) -> validate_run.ValidateConfig:
    fuzz, valid, concurrent = _counts(args)
    return validate_run.ValidateConfig(kernel=args.kernel, spec=kernel_args.spec_of(args, True), fuzz=fuzz,
                                       valid=valid, concurrent=concurrent, seed=args.seed, timeout=args.timeout)


def _exit_bench_args(eb: argparse.ArgumentParser) -> None:
    kernel_args.add_kernel_args(eb)
    eb.add_argument("--iterations", type=positive_int, default=2000, help="fork+exit per state")
    eb.add_argument("--reps", type=positive_int, default=3, help="boots per kernel (an interval needs >= 3)")
    eb.add_argument("--timeout", type=positive_float, default=900.0)


def _exit_bench_config(args: argparse.Namespace) -> exit_bench_run.ExitBenchConfig:
    kernels, spec = kernel_args.bench_kernels(args)
    return exit_bench_run.ExitBenchConfig(kernels=tuple(kernels), spec=spec, iterations=args.iterations,
                                          reps=args.reps, timeout=args.timeout)


def _reclaim_bench_args(rb: argparse.ArgumentParser) -> None:
    kernel_args.add_kernel_args(rb)
    rb.add_argument("--rounds", type=positive_int, default=5, help="memory.reclaim rounds per state per boot")
    rb.add_argument("--arena-mb", type=positive_int, default=4,
                    help="anonymous memory reclaimed per round, MiB (under TCG + KASAN a 32 MiB round takes ~1 min)")
    rb.add_argument("--reps", type=positive_int, default=3, help="boots per kernel (an interval needs >= 3)")
    rb.add_argument("--timeout", type=positive_float, default=1200.0)


def _reclaim_bench_config(args: argparse.Namespace) -> reclaim_bench_run.ReclaimBenchConfig:
    kernels, spec = kernel_args.bench_kernels(args)
    return reclaim_bench_run.ReclaimBenchConfig(kernels=tuple(kernels), spec=spec, rounds=args.rounds,
                                                arena_mb=args.arena_mb, reps=args.reps, timeout=args.timeout)


def _rebuild_time_args(bn: argparse.ArgumentParser) -> None:
    bn.add_argument("--reps", type=positive_int, default=3)
    _profile_args(bn)
    bn.add_argument("--source", default=build.DEFAULT_SOURCE,
                    help="debian-6.12, a kernel tarball or a source tree (its debug kernel's warm tree is used)")
    bn.add_argument("--fuzz", type=nonneg_int, default=None,
                    help="random malformed writes per validate (default: the profile's)")
    bn.add_argument("--timeout", type=positive_float, default=600.0)


def _rebuild_time_config(args: argparse.Namespace) -> rebuild_time_run.RebuildTimeConfig:
    return rebuild_time_run.RebuildTimeConfig(reps=args.reps, fuzz=args.fuzz, timeout=args.timeout,
                                              profile="quick" if args.quick else "full", source=args.source)


BUILD = verbs.Verb("build", "build (or reuse) a kernel: tinyconfig + fragments + a patch series", _build_args,
                   _build_config, build_run.run, render.build, build_run.BuildSummary)
BUILD_LIST = verbs.Verb("build-list", "list the cached kernel builds", lambda p: None, _build_list_config,
                        build_list_run.run, render.build_list, build_list_run.BuildListSummary)
BUILD_PRUNE = verbs.Verb("build-prune", "delete builds of older recipes and object trees no build uses",
                         _build_prune_args, _build_prune_config, build_prune_run.run, render.build_prune,
                         build_prune_run.BuildPruneSummary)
RUN = verbs.Verb("run", "boot a kernel and run a command in it: kvds qemu run -- CMD...", _run_args, _run_config,
                 run_run.run, render.run, run_run.RunSummary, dry_run=run_run.dry_run,
                 render_dry_run=render.run_dry_run, exit_status=run_run.exit_status)
VALIDATE = verbs.Verb("validate", "the validator (errno tables, >=10,000 malformed and >=10,000 well-formed lines, a "
                                  "concurrent phase), kselftest, KUnit and a kmemleak scan under KASAN + lockdep; "
                                  "KTAP summarized", _validate_args, _validate_config, validate_run.run,
                      render.validate, validate_run.ValidateSummary, exit_status=validate_run.exit_status)
EXIT_BENCH = verbs.Verb("exit-bench", "the exit path's cost in the guest: fork+exit with mm_intent unused, used by "
                                      "one process, used by 257 processes; several kernels compared",
                        _exit_bench_args, _exit_bench_config, exit_bench_run.run, render.exit_bench,
                        exit_bench_run.ExitBenchSummary, exit_status=exit_bench_run.exit_status)
RECLAIM_BENCH = verbs.Verb("reclaim-bench", "mm_intent's reclaim consumer in the guest: memory.reclaim time and "
                                            "pgscan/pgsteal with the feature off, on with 1,024 ranges, and the "
                                            "critical pages it keeps", _reclaim_bench_args, _reclaim_bench_config,
                           reclaim_bench_run.run, render.reclaim_bench, reclaim_bench_run.ReclaimBenchSummary,
                           exit_status=reclaim_bench_run.exit_status)
REBUILD_TIME = verbs.Verb("rebuild-time", "time edit -> rebuild -> boot -> validate: a one-line change to the "
                                          "mm_intent series, rebuilt in the warm tree and validated (goal: 90 s)",
                          _rebuild_time_args, _rebuild_time_config, rebuild_time_run.run, render.rebuild_time,
                          rebuild_time_run.RebuildTimeSummary, exit_status=rebuild_time_run.exit_status)
VERBS = (BUILD, BUILD_LIST, BUILD_PRUNE, RUN, VALIDATE, EXIT_BENCH, RECLAIM_BENCH, REBUILD_TIME)


def _build_or_alias(args: argparse.Namespace) -> int:
    """`kvds qemu build`, or with --list / --prune the verb it is an alias of."""
    if args.list and args.prune:
        raise UserError("--list and --prune are two verbs: give one")
    if args.dry_run and not args.prune:
        raise UserError("--dry-run goes with --prune")
    return verbs.execute(BUILD_LIST if args.list else BUILD_PRUNE if args.prune else BUILD, args)


def _failing_build_exits_1(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A kernel or guest program that fails to build (make, git or gcc failed on a well-formed request) is the
    build's failure, not kvds's: its log tail on stderr, exit 1."""
    def guarded(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except build.BuildError as exc:
            print(f"kvds: qemu: {exc}", file=sys.stderr)
            return 1
    return guarded


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("qemu", help="build, boot and validate a patched guest kernel under QEMU")
    sub = p.add_subparsers(dest="qemu_command", metavar="VERB", parser_class=type(p))
    sub.required = True
    for verb in VERBS:
        vp = verbs.add(sub, verb)
        func: Any = _build_or_alias if verb is BUILD else vp.get_default("func")
        vp.set_defaults(func=_failing_build_exits_1(func))
