"""`kvds qemu build|run|validate`: the guest lab's command line (argument handling only; work is elsewhere)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from harness.cli_args import add_json_flag, nonneg_int, positive_float, positive_int
from harness.emit import emit
from harness.errors import UserError
from harness.progress import say
from qemu_validation import build, dry_run, guest_run, kernel_args, rebuild_bench, render, runner, validate
from harness.results import dumps as strict_dumps


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
                   help=f"random malformed writes (full: {validate.MIN_MALFORMED}, quick: "
                        f"{validate.PROFILES['quick'].fuzz})")
    v.add_argument("--valid", type=nonneg_int, default=None,
                   help=f"random well-formed writes (full: {validate.MIN_VALID}, quick: "
                        f"{validate.PROFILES['quick'].valid})")
    v.add_argument("--concurrent", type=nonneg_int, default=None, metavar="SECONDS",
                   help="seconds of register/clear/lookup racing process exit, exec and munmap (full: "
                        f"{validate.MIN_CONCURRENT_S}, quick: {validate.PROFILES['quick'].concurrent})")
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

    from qemu_validation import reclaim_bench
    reclaim_bench.add_parser(sub, kernel_args.add_kernel_args, add_json_flag)

    bn = sub.add_parser("bench", help="time edit -> rebuild -> boot -> validate: a one-line change to the mm_intent "
                                      "series, rebuilt in the warm tree and validated (goal: 90 s)")
    bn.add_argument("--reps", type=positive_int, default=3)
    _profile_args(bn)
    bn.add_argument("--source", default=build.DEFAULT_SOURCE,
                    help="debian-6.12, a kernel tarball or a source tree (its debug kernel's warm tree is used)")
    bn.add_argument("--fuzz", type=nonneg_int, default=None,
                    help="random malformed writes per validate (default: the profile's)")
    bn.add_argument("--timeout", type=positive_float, default=600.0)
    add_json_flag(bn)
    bn.set_defaults(func=cmd_bench)


def _profile_args(p: argparse.ArgumentParser) -> None:
    q = validate.PROFILES["quick"]
    p.add_argument("--quick", action="store_true",
                   help=f"the edit loop: every check with {q.fuzz:,} malformed + {q.valid:,} well-formed lines and "
                        f"a {q.concurrent} s concurrent phase (not the gate: the full profile is)")


def _counts(args: argparse.Namespace) -> tuple[int, int, int]:
    """fuzz, valid, concurrent: the profile's, each overridden by its flag when given."""
    prof = validate.PROFILES["quick" if args.quick else "full"]
    return (prof.fuzz if args.fuzz is None else args.fuzz, prof.valid if args.valid is None else args.valid,
            prof.concurrent if args.concurrent is None else args.concurrent)


def _fail(msg: str) -> int:
    print(f"kvds: qemu: {msg}", file=sys.stderr)
    return 1


def cmd_build(args: argparse.Namespace) -> int:
    if args.dry_run and not args.prune:
        raise UserError("--dry-run goes with --prune")
    if args.prune:
        out = build.prune(dry_run=args.dry_run)
        if args.json:
            print(strict_dumps(out, indent=2))
            return 0
        for r in out["removed"]:
            verb = "would remove" if args.dry_run else "removed"
            print(f"{verb} {r['what']}: {r['bytes'] / 2**30:.2f} GiB  {r['path']}")
        print(f"{'would free' if args.dry_run else 'freed'} {out['freed_bytes'] / 2**30:.2f} GiB")
        return 0
    if args.list:
        rows = [{"id": b.id, "label": b.label, "release": b.info.get("kernel_release"),
                 "build_seconds": b.info.get("build_seconds"), "phases": b.info.get("phases"),
                 "incremental": b.info.get("incremental"), "bzImage": str(b.bzimage)} for b in build.all_builds()]
        if args.json:
            print(strict_dumps(rows, indent=2))
        for r in rows if not args.json else []:
            phases = ", ".join(f"{k} {v} s" for k, v in (r["phases"] or {}).items())
            print(f"{r['id']}  {r['label']:<36} {r['release']}  built in {r['build_seconds']} s"
                  + (f" ({phases})" if phases else ""))
        return 0
    spec = kernel_args.spec_of(args, args.kasan)
    was_cached = build.cached(spec) is not None
    try:
        kb = build.ensure_built(spec, jobs=args.jobs, say=say)
    except build.BuildError as exc:
        return _fail(str(exc))
    out = {"id": kb.id, "label": kb.label, "cached": was_cached, "bzImage": str(kb.bzimage),
           "config": str(kb.config), "build_seconds": kb.info.get("build_seconds"), "phases": kb.info.get("phases"),
           "incremental": kb.info.get("incremental"),
           "release": kb.info.get("kernel_release")}
    if args.json:
        print(strict_dumps(out, indent=2))
    else:
        print(f"{kb.id} {kb.label} {'(cached)' if was_cached else ''}\n  {kb.bzimage}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("qemu run: no command given (kvds qemu run -- CMD...)")
    if any(" " in a or not a for a in args.append):
        raise UserError("--append takes one kernel command-line word")
    if args.dry_run or args.verbose:
        plan = dry_run.plan(args.kernel, command, args.share, host_root=args.host_root, memory_mb=args.memory,
                            cpus=args.cpus, extra_append=tuple(args.append))
        if args.dry_run:
            emit(None, plan, args.json, dry_run.render)
            return 0
        print("Running with: $ " + shlex.join(plan["qemu_argv"]), file=sys.stderr)
    try:
        res = guest_run.run_guest(args.kernel, command, args.share, timeout=args.timeout, host_root=args.host_root,
                              memory_mb=args.memory, cpus=args.cpus, extra_append=tuple(args.append))
    except build.BuildError as exc:
        return _fail(str(exc))
    if args.json:
        print(strict_dumps(res.as_dict(), indent=2))
        return _run_status(res)
    out = runner.command_output(res.console_log.read_text(errors="replace"))
    if out:
        print(out)
    if res.failure():
        print(f"kvds: qemu run: {res.failure()}", file=sys.stderr)
        for f in res.findings[:3]:
            print(f.context, file=sys.stderr)
    return _run_status(res)


def _run_status(res: runner.BootResult) -> int:
    if res.timed_out:
        return guest_run.TIMEOUT_STATUS
    if res.findings or res.status is None:
        return guest_run.KERNEL_FAILURE_STATUS
    return res.status


def cmd_validate(args: argparse.Namespace) -> int:
    fuzz, valid, concurrent = _counts(args)
    try:
        summary, run = validate.validate(args.kernel, kernel_args.spec_of(args, True), fuzz=fuzz, seed=args.seed,
                                         timeout=args.timeout, valid=valid, concurrent=concurrent)
    except build.BuildError as exc:
        return _fail(str(exc))
    if args.json:
        print(strict_dumps(summary, indent=2))
    else:
        _print_summary(summary, run.path)
    return 0 if summary["ok"] else 1


def cmd_exit_bench(args: argparse.Namespace) -> int:
    from qemu_validation import exit_bench
    kernels, spec = kernel_args.bench_kernels(args)
    cfg = exit_bench.ExitBenchConfig(kernels=tuple(kernels), spec=spec, iterations=args.iterations, reps=args.reps,
                                     timeout=args.timeout)
    try:
        out, run = exit_bench.bench(cfg)
    except build.BuildError as exc:
        return _fail(str(exc))
    emit(run, out.as_dict(), args.json, lambda s: render.exit_bench(s, run, cfg.reps))
    return 0 if out.ok else 1


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        out, run = rebuild_bench.bench(reps=args.reps, fuzz=args.fuzz, timeout=args.timeout,
                                       profile="quick" if args.quick else "full", source=args.source)
    except build.BuildError as exc:
        return _fail(str(exc))
    if args.json:
        print(strict_dumps(out, indent=2))
        return 0 if out["all_validated"] else 1
    c = out["counts"]
    print(f"edit -> rebuild -> boot -> validate on {out['base_kernel']['label']} ({out['base_kernel']['release']}; "
          f"one line of {rebuild_bench.TARGET_FILE} changed per rep); {out['profile']} validate: {c['fuzz']:,} "
          f"malformed + {c['valid']:,} well-formed lines, {c['concurrent_s']} s concurrent"
          + ("" if out["gate"] else " (the edit loop, not the gate)"))
    print(f"  {'rep':>3}  {'build s':>8}  {'compiled':>8}  {'boot+validate s':>15}  {'total s':>8}  validate")
    for r in out["reps"]:
        print(f"  {r['rep']:>3}  {r['build_seconds']:>8.1f}  {len(r['compiled']):>8}  {r['boot_validate_seconds']:>15.1f}  "
              f"{r['total_seconds']:>8.1f}  {'PASS' if r['validate_ok'] else 'FAIL'} ({r['splats']} splats)")
    print(f"  median {out['median_total_seconds']} s (build {out['median_build_seconds']} s, boot+validate "
          f"{out['median_boot_validate_seconds']} s); verdict: {out['goal_text']}; results: {run.path}")
    _print_phases(out["median_guest_phases"], f"where boot+validate goes (median of {len(out['reps'])} reps)")
    for r in out["reps"]:
        if not r["validate_ok"]:
            print(f"  rep {r['rep']} failed validate: {r['validate_failure']} (run {r['validate_run']})")
    return 0 if out["all_validated"] else 1


def _print_phases(rows: list[dict], title: str) -> None:
    if rows:
        print(f"  {title}:")
        for p in rows:
            print(f"    {p['phase']:<66} {p['seconds']:>7.1f} s")


def _print_summary(s: dict, path: Path) -> None:
    t = s["tests"]
    print(f"mm_intent validate on {s['kernel']['label']} ({s['kernel']['id']}): {'PASS' if s['ok'] else 'FAIL'}")
    print(f"  KTAP: {t['passed']}/{t['planned']} passed, {t['failed']} failed, {t['skipped']} skipped"
          f"{'' if t['complete'] else ' (incomplete)'}")
    print(f"  malformed register writes: {s['malformed_writes']} (wrong errno: {s['errno_mismatches']},"
          f" fuzz {s['fuzz_ms']} ms)")
    if s.get("fuzz_expected_errnos"):
        print("  random writes by expected errno: " + ", ".join(f"{k} {v}" for k, v in s["fuzz_expected_errnos"].items()))
    print(f"  well-formed register writes: {s['valid_writes']} ({s['valid_via_pidfd']} by pidfd); kernel errno "
          f"table rows: {s['kernel_table_rows']}; seed {s['seed']}")
    print(f"  concurrent phase: {s['concurrent_ms']} ms, {s['concurrent_ops']} operations, "
          f"{s['concurrent_processes']} processes")
    for name in ("kselftest", "kunit"):
        r = s.get(name)
        if r:
            print(f"  {name}: {r['passed']}/{r['planned']} passed, {r['failed']} failed, {r['skipped']} skipped"
                  f"{'' if r['complete'] else ' (incomplete)'}")
    if s.get("kunit_cases"):
        print(f"  KUnit cases (parameterised rows included): {s['kunit_cases']['passed']} passed, "
              f"{s['kunit_cases']['failed']} failed")
    print(f"  kmemleak: {s['kmemleak_leaks'] if s['kmemleak_leaks'] is not None else '-'} unreferenced objects")
    print(f"  console splats (oops/BUG/KASAN/lockdep/WARN/leak): {s['splats']}")
    print(f"  boot + validate: {s['boot']['seconds']} s; results: {path}")
    if not s.get("gate", True):
        print("  (fewer lines or a shorter concurrent phase than the full profile: the edit loop, not the gate)")
    _print_phases(s.get("phases") or [], "where the time went (guest clock)")
    for f in t["failures"]:
        print(f"  not ok {f['number']} {f['name']}: {f['reason']}")
        for d in f["diagnostics"][:8]:
            print(f"      # {d}")
    for f in s["findings"][:3]:
        print(f"  {f['kind']}: {f['line']}")
    if s["failure"]:
        print(f"  failure: {s['failure']}")
