"""`kvds qemu VERB`: the guest lab's command line. Argument handling only: each verb's arguments become one config
dataclass, its own module does the work and returns a typed summary, render.py prints it and harness/emit.py
prints it with --json (the one shape). build: build_run; run: guest_run (dry_run for --dry-run); validate:
validate; exit-bench: exit_bench; reclaim-bench: reclaim_bench; rebuild-time: rebuild_time."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import environment
from harness.cli_args import add_json_flag, nonneg_int, positive_float, positive_int
from harness.emit import emit
from harness.errors import UserError
from harness.progress import say
from qemu_validation import build_run, dry_run, exit_bench_run, rebuild_time_run, reclaim_bench_run, render, validate_run
from qemu_validation.boot import guest_command, kernel_args, runner
from qemu_validation.kernel import build


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("qemu", help="build, boot and validate a patched guest kernel under QEMU")
    sub = p.add_subparsers(dest="qemu_command", metavar="VERB", parser_class=type(p))
    sub.required = True

    b = sub.add_parser("build", help="build (or reuse) a kernel: tinyconfig + fragments + a patch series")
    kernel_args.add_spec_args(b)
    b.add_argument("--kasan", action="store_true", help="debug kernel: KASAN + lockdep (what validate uses)")
    b.add_argument("--jobs", type=positive_int, default=None, help="make -j (default: all CPUs)")
    b.add_argument("--list", action="store_true", help="list cached builds instead of building")
    b.add_argument("--prune", action="store_true",
                   help="delete builds of older recipes and object trees no build uses, instead of building")
    b.add_argument("--dry-run", action="store_true", help="with --prune: say what would go, delete nothing")
    add_json_flag(b)
    b.set_defaults(func=cmd_build)

    r = sub.add_parser("run", help="boot a kernel and run a command in it: kvds qemu run -- CMD...")
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
    add_json_flag(r)
    r.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("validate", help="the validator (errno tables, >=10,000 malformed and >=10,000 well-formed "
                                        "lines, a concurrent phase), kselftest, KUnit and a kmemleak scan under "
                                        "KASAN + lockdep; KTAP summarized")
    v.add_argument("--kernel", metavar="ID", help="validate this build instead of building the debug kernel")
    kernel_args.add_spec_args(v)
    _profile_args(v)
    v.add_argument("--fuzz", type=nonneg_int, default=None,
                   help=f"random malformed writes (full: {validate_run.MIN_MALFORMED}, quick: "
                        f"{validate_run.PROFILES['quick'].fuzz})")
    v.add_argument("--valid", type=nonneg_int, default=None,
                   help=f"random well-formed writes (full: {validate_run.MIN_VALID}, quick: "
                        f"{validate_run.PROFILES['quick'].valid})")
    v.add_argument("--concurrent", type=nonneg_int, default=None, metavar="SECONDS",
                   help="seconds of register/clear/lookup racing process exit, exec and munmap (full: "
                        f"{validate_run.MIN_CONCURRENT_S}, quick: {validate_run.PROFILES['quick'].concurrent})")
    v.add_argument("--seed", type=positive_int, default=None,
                   help="seed of the random lines (default: a fresh one, printed; pass it back to reproduce)")
    v.add_argument("--timeout", type=positive_float, default=900.0)
    add_json_flag(v)
    v.set_defaults(func=cmd_validate)

    eb = sub.add_parser("exit-bench", help="the exit path's cost in the guest: fork+exit with mm_intent unused, "
                                           "used by one process, used by 257 processes; several kernels compared")
    kernel_args.add_kernel_args(eb)
    eb.add_argument("--iterations", type=positive_int, default=2000, help="fork+exit per state")
    eb.add_argument("--reps", type=positive_int, default=3, help="boots per kernel (an interval needs >= 3)")
    eb.add_argument("--timeout", type=positive_float, default=900.0)
    add_json_flag(eb)
    eb.set_defaults(func=cmd_exit_bench)

    rb = sub.add_parser("reclaim-bench", help="mm_intent's reclaim consumer in the guest: memory.reclaim time and "
                                              "pgscan/pgsteal with the feature off, on with 1,024 ranges, and the "
                                              "critical pages it keeps")
    kernel_args.add_kernel_args(rb)
    rb.add_argument("--rounds", type=positive_int, default=5, help="memory.reclaim rounds per state per boot")
    rb.add_argument("--arena-mb", type=positive_int, default=4,
                    help="anonymous memory reclaimed per round (under TCG + KASAN a 32 MiB round takes ~1 min)")
    rb.add_argument("--reps", type=positive_int, default=3, help="boots per kernel (an interval needs >= 3)")
    rb.add_argument("--timeout", type=positive_float, default=1200.0)
    add_json_flag(rb)
    rb.set_defaults(func=cmd_reclaim_bench)

    bn = sub.add_parser("rebuild-time", help="time edit -> rebuild -> boot -> validate: a one-line change to the mm_intent "
                                      "series, rebuilt in the warm tree and validated (goal: 90 s)")
    bn.add_argument("--reps", type=positive_int, default=3)
    _profile_args(bn)
    bn.add_argument("--source", default=build.DEFAULT_SOURCE,
                    help="debian-6.12, a kernel tarball or a source tree (its debug kernel's warm tree is used)")
    bn.add_argument("--fuzz", type=nonneg_int, default=None,
                    help="random malformed writes per validate (default: the profile's)")
    bn.add_argument("--timeout", type=positive_float, default=600.0)
    add_json_flag(bn)
    bn.set_defaults(func=cmd_rebuild_time)


def _profile_args(p: argparse.ArgumentParser) -> None:
    q = validate_run.PROFILES["quick"]
    p.add_argument("--quick", action="store_true",
                   help=f"the edit loop: every check with {q.fuzz:,} malformed + {q.valid:,} well-formed lines and "
                        f"a {q.concurrent} s concurrent phase (not the gate: the full profile is)")


def _counts(args: argparse.Namespace) -> tuple[int, int, int]:
    """fuzz, valid, concurrent: the profile's, each overridden by its flag when given."""
    prof = validate_run.PROFILES["quick" if args.quick else "full"]
    return (prof.fuzz if args.fuzz is None else args.fuzz, prof.valid if args.valid is None else args.valid,
            prof.concurrent if args.concurrent is None else args.concurrent)


def _fail(msg: str) -> int:
    print(f"kvds: qemu: {msg}", file=sys.stderr)
    return 1


def cmd_build(args: argparse.Namespace) -> int:
    if args.dry_run and not args.prune:
        raise UserError("--dry-run goes with --prune")
    action = "prune" if args.prune else "list" if args.list else "build"
    spec = kernel_args.spec_of(args, args.kasan) if action == "build" else build.BuildSpec()
    cfg = build_run.BuildConfig(spec=spec, action=action, jobs=args.jobs, dry_run=args.dry_run)
    try:
        out = build_run.run(cfg, say=say)
    except build.BuildError as exc:
        return _fail(str(exc))
    shown = {"prune": render.prune, "list": render.build_list, "build": render.build_result}[cfg.action]
    emit(None, out.as_dict(), args.json, shown)
    return 0


def _icount_shift(text: str) -> int:
    try:
        return environment.icount_shift(text)
    except ValueError as exc:  # argparse prints only an ArgumentTypeError's own words
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("qemu run: no command given (kvds qemu run -- CMD...)")
    if any(" " in a or not a for a in args.append):
        raise UserError("--append takes one kernel command-line word")
    cfg = guest_command.RunConfig(command=tuple(command), kernel=args.kernel, share=args.share, host_root=args.host_root,
                              timeout=args.timeout, memory_mb=args.memory, cpus=args.cpus, append=tuple(args.append),
                              icount_shift=args.icount)
    if args.dry_run or args.verbose:
        plan = dry_run.plan(cfg)
        if args.dry_run:
            emit(None, plan.as_dict(), args.json, render.dry_run)
            return 0
        print("Running with: $ " + shlex.join(plan.qemu_argv), file=sys.stderr)
    try:
        res = guest_command.run(cfg)
    except build.BuildError as exc:
        return _fail(str(exc))
    emit(None, res.as_dict(), args.json, lambda _: _print_run(res))
    return guest_command.exit_status(res)


def _print_run(res: runner.BootResult) -> None:
    """The guest command's own output, then why the run failed (the console's first findings)."""
    out = runner.command_output(res.console_log.read_text(errors="replace"))
    if out:
        print(out)
    if res.failure:
        print(f"kvds: qemu run: {res.failure}", file=sys.stderr)
        for f in res.findings[:3]:
            print(f.context, file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    fuzz, valid, concurrent = _counts(args)
    cfg = validate_run.ValidateConfig(kernel=args.kernel, spec=kernel_args.spec_of(args, True), fuzz=fuzz, valid=valid,
                                  concurrent=concurrent, seed=args.seed, timeout=args.timeout)
    try:
        summary, run = validate_run.validate(cfg)
    except build.BuildError as exc:
        return _fail(str(exc))
    emit(run, summary.as_dict(), args.json, lambda s: render.validate(s, run.path))
    return 0 if summary.ok else 1


def cmd_exit_bench(args: argparse.Namespace) -> int:
    kernels, spec = kernel_args.bench_kernels(args)
    cfg = exit_bench_run.ExitBenchConfig(kernels=tuple(kernels), spec=spec, iterations=args.iterations, reps=args.reps,
                                     timeout=args.timeout)
    return _guest_bench(exit_bench_run.bench, cfg, render.exit_bench, args.json)


def cmd_reclaim_bench(args: argparse.Namespace) -> int:
    kernels, spec = kernel_args.bench_kernels(args)
    cfg = reclaim_bench_run.ReclaimBenchConfig(kernels=tuple(kernels), spec=spec, rounds=args.rounds,
                                           arena_mb=args.arena_mb, reps=args.reps, timeout=args.timeout)
    return _guest_bench(reclaim_bench_run.bench, cfg, render.reclaim_bench, args.json)


def _guest_bench(bench: Callable[[Any], tuple[Any, Any]], cfg: Any, table: Callable[..., None], as_json: bool) -> int:
    """A guest bench (exit-bench, reclaim-bench): run from its config, its typed summary printed as a table or
    with --json; exit 1 unless every boot was usable."""
    try:
        out, run = bench(cfg)
    except build.BuildError as exc:
        return _fail(str(exc))
    emit(run, out.as_dict(), as_json, lambda s: table(s, run, cfg.reps))
    return 0 if out.ok else 1


def cmd_rebuild_time(args: argparse.Namespace) -> int:
    cfg = rebuild_time_run.RebuildTimeConfig(reps=args.reps, fuzz=args.fuzz, timeout=args.timeout,
                                         profile="quick" if args.quick else "full", source=args.source)
    try:
        out, run = rebuild_time_run.measure(cfg)
    except build.BuildError as exc:
        return _fail(str(exc))
    emit(run, out.as_dict(), args.json, lambda s: render.rebuild_time(s, run.path, rebuild_time_run.TARGET_FILE))
    return 0 if out.all_validated else 1
