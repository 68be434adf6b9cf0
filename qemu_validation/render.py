"""The guest lab's tables: what `kvds qemu VERB` prints without --json, one function per verb taking that verb's
typed summary (harness/verbs.py). Printing only: the figures are computed by each verb's `_run` module; every
estimate is printed by harness.report.fmt, the project's one formatter. The run directory is said by the verb
runner ("results in ..."), so no table repeats it."""

from __future__ import annotations

import shlex
import statistics
import sys
from typing import Any, Mapping

from harness.report import fmt
from qemu_validation.boot import runner
from qemu_validation.build_list_run import BuildListSummary
from qemu_validation.build_prune_run import BuildPruneSummary
from qemu_validation.build_run import BuildSummary
from qemu_validation.exit_bench_run import STATES, ExitBenchSummary
from qemu_validation.rebuild_time_run import TARGET_FILE, RebuildTimeSummary
from qemu_validation.reclaim_bench_run import ReclaimBenchSummary
from qemu_validation.run_run import RunPlan, RunSummary
from qemu_validation.validate_run import ValidateSummary


def build(b: BuildSummary) -> None:
    print(f"{b.id} {b.label} {'(cached)' if b.cached else ''}\n  {b.bzImage}")


def build_list(s: BuildListSummary) -> None:
    for r in s.builds:
        phases = ", ".join(f"{k} {v} s" for k, v in (r["phases"] or {}).items())
        print(f"{r['id']}  {r['label']:<36} {r['release']}  built in {r['build_seconds']} s"
              + (f" ({phases})" if phases else ""))


def build_prune(out: BuildPruneSummary) -> None:
    dry = out.dry_run
    for r in out.removed:
        print(f"{'would remove' if dry else 'removed'} {r['what']}: {r['bytes'] / 2**30:.2f} GiB  {r['path']}")
    print(f"{'would free' if dry else 'freed'} {out.freed_bytes / 2**30:.2f} GiB")


def run(res: RunSummary) -> None:
    """The guest command's own output, then why the run failed (the console's first findings)."""
    out = runner.command_output(res.console_log.read_text(errors="replace"))
    if out:
        print(out)
    if res.failure:
        print(f"kvds: qemu run: {res.failure}", file=sys.stderr)
        for f in res.findings[:3]:
            print(f.context, file=sys.stderr)


def run_dry_run(p: RunPlan) -> None:
    k = p.kernel
    print(f"kernel {k['label']}" + (f" ({k['id'][:12]})" if k["built"] else " (not built: the run builds it first)"))
    print(f"guest command (the initramfs's /init runs it): {shlex.join(p.guest_argv)}")
    print("$ " + shlex.join(p.qemu_argv))


def phases(rows: list[dict], title: str) -> None:
    if rows:
        print(f"  {title}:")
        for p in rows:
            print(f"    {p['phase']:<66} {p['seconds']:>7.1f} s")


def _ktap_line(name: str, r: Mapping[str, Any]) -> str:
    return (f"  {name}: {r['passed']}/{r['planned']} passed, {r['failed']} failed, {r['skipped']} skipped"
            f"{'' if r['complete'] else ' (incomplete)'}")


def validate(s: ValidateSummary) -> None:
    t = s.tests
    print(f"mm_intent validate on {s.kernel['label']} ({s.kernel['id']}): {'PASS' if s.ok else 'FAIL'}")
    print(_ktap_line("KTAP", t))
    print(f"  malformed register writes: {s.malformed_writes} (wrong errno: {s.errno_mismatches},"
          f" fuzz {s.fuzz_ms} ms)")
    if s.fuzz_expected_errnos:
        print("  random writes by expected errno: " + ", ".join(f"{k} {v}" for k, v in s.fuzz_expected_errnos.items()))
    print(f"  well-formed register writes: {s.valid_writes} ({s.valid_via_pidfd} by pidfd); kernel errno "
          f"table rows: {s.kernel_table_rows}; seed {s.seed}")
    print(f"  concurrent phase: {s.concurrent_ms} ms, {s.concurrent_ops} operations, "
          f"{s.concurrent_processes} processes")
    for name, r in (("kselftest", s.kselftest), ("kunit", s.kunit)):
        if r:
            print(_ktap_line(name, r))
    if s.kunit_cases:
        print(f"  KUnit cases (parameterised rows included): {s.kunit_cases['passed']} passed, "
              f"{s.kunit_cases['failed']} failed")
    print(f"  kmemleak: {fmt.number(s.kmemleak_leaks, 'd', why='no scan')} unreferenced objects")
    print(f"  console splats (oops/BUG/KASAN/lockdep/WARN/leak): {s.splats}")
    print(f"  boot + validate: {s.boot['seconds']} s")
    if s.gate is False:
        print("  (fewer lines or a shorter concurrent phase than the full profile: the edit loop, not the gate)")
    phases(s.phases or [], "where the time went (guest clock)")
    for f in t["failures"]:
        print(f"  not ok {f['number']} {f['name']}: {f['reason']}")
        for d in f["diagnostics"][:8]:
            print(f"      # {d}")
    for f in s.findings[:3]:
        print(f"  {f['kind']}: {f['line']}")
    if s.failure:
        print(f"  failure: {s.failure}")


def kernel_heading(k: Mapping[str, Any]) -> str:
    """One kernel's line in a guest bench's table (exit-bench, reclaim-bench)."""
    what = ("debug" if k["debug"] else "base") + (", mm_intent" if k["mm_intent"] else ", no mm_intent")
    return f"  {k['id']} {k['label']} ({k['release']}; {what}; {k['boots']} boots)"


def reps_of(boots: list[dict]) -> int:
    """Boots per kernel (the bench's --reps), counted from the boots it ran."""
    per: dict[str, int] = {}
    for b in boots:
        per[b["kernel"]] = per.get(b["kernel"], 0) + 1
    return max(per.values(), default=0)


def bench_end(comparisons: list[dict], ok: bool, failure: str | None) -> None:
    """A guest bench's kernel-vs-kernel ratios and its failure."""
    for c in comparisons:
        print(f"  {c['kernel']} / {c['reference']} ({c['state']}): {fmt.estimate(c)}: {c['difference']}")
    if not ok:
        print(f"  failure: {failure or 'the benchmark did not finish'}")


def exit_bench(out: ExitBenchSummary) -> None:
    print(f"fork+exit+wait (unused, one, many) and munmap() of one page (unmap_*), {out.iterations} per state "
          f"per boot, {reps_of(out.boots)} boot(s) per kernel in alternating order; mean of per-boot medians "
          f"[95% interval over boots], ms:")
    for k in out.kernels:
        print(kernel_heading(k))
        against = {**{s: ("unused", r) for s, r in k["vs_unused"].items()},
                   **{s: ("unmap_untagged", r) for s, r in k.get("vs_unmap_untagged", {}).items()}}
        for s in (s for s in STATES if s in k["median_ms"]):   # runs before the unmap states lack them
            ref, r = against.get(s, ("", None))
            vs = (f"  vs {ref} (per boot) {fmt.estimate(r)}: {r['difference']}; higher in {r['boots_higher']} of "
                  f"{r['boots']} boots" if r else "")
            print(f"    {s:>14}: {fmt.estimate(k['median_ms'][s])}{vs}")
    bench_end(out.comparisons, out.ok, out.failure)


def rebuild_time(out: RebuildTimeSummary) -> None:
    c = out.counts
    print(f"edit -> rebuild -> boot -> validate on {out.base_kernel['label']} ({out.base_kernel['release']}; "
          f"one line of {TARGET_FILE} changed per rep); {out.profile} validate: {c['fuzz']:,} "
          f"malformed + {c['valid']:,} well-formed lines, {c['concurrent_s']} s concurrent"
          + ("" if out.gate else " (the edit loop, not the gate)"))
    print(f"  {'rep':>3}  {'build s':>8}  {'compiled':>8}  {'boot+validate s':>15}  {'total s':>8}  validate")
    for r in out.reps:
        print(f"  {r['rep']:>3}  {r['build_seconds']:>8.1f}  {len(r['compiled']):>8}  "
              f"{r['boot_validate_seconds']:>15.1f}  {r['total_seconds']:>8.1f}  "
              f"{'PASS' if r['validate_ok'] else 'FAIL'} ({r['splats']} splats)")
    print(f"  median {out.median_total_seconds} s (build {out.median_build_seconds} s, boot+validate "
          f"{out.median_boot_validate_seconds} s); verdict: {out.goal_text}")
    phases(out.median_guest_phases, f"where boot+validate goes (median of {len(out.reps)} reps)")
    for r in out.reps:
        if not r["validate_ok"]:
            print(f"  rep {r['rep']} failed validate: {r['validate_failure']} (run {r['validate_run']})")


def reclaim_bench(out: ReclaimBenchSummary) -> None:
    print(f"memory.reclaim of a {out.arena_mb} MiB arena (faulted back in each round), {out.rounds} rounds per "
          f"state per boot, {reps_of(out.boots)} boot(s) per kernel in alternating order; mean of per-boot "
          f"medians [95% interval over boots], ms per round:")
    for k in out.kernels:
        print(kernel_heading(k))
        for s, m in k["median_ms"].items():
            per = k["per_boot"][s]
            extra = "" if s != "critical" else (
                f"; critical pages swapped (worst round) {max(b['max_swapped_critical'] for b in per)}, "
                f"other half swapped (fewest) {min(b['min_swapped_other'] for b in per)}")
            steal = [b["median_pgsteal"] for b in per]
            scan = [b["median_pgscan"] for b in per]
            print(f"    {s:>8}: {fmt.estimate(m)}  pgscan {statistics.median(scan):.0f}, pgsteal "
                  f"{statistics.median(steal):.0f} per round (median over boots){extra}")
            if s in k["median_norm"]:
                print(f"    {'':>8}  normalised (ns / reference loop ns): {fmt.estimate(k['median_norm'][s])}")
        for pair, r in k["cost"].items():
            w = k["cost_within_boot"][pair]
            print(f"    {pair}: {fmt.estimate(r)}: {r['difference']}; within each boot {fmt.estimate(w)}: "
                  f"{w['difference']}")
            if pair in k["cost_within_boot_norm"]:
                n = k["cost_within_boot_norm"][pair]
                print(f"    {'':>{len(pair)}}  normalised, within each boot {fmt.estimate(n)}: {n['difference']}")
    for c in out.comparisons:
        for kind, what in (("paired", "paired by repetition"), ("paired_norm", "paired, normalised")):
            if c.get(kind):
                p = c[kind]
                print(f"  {c['kernel']} / {c['reference']} ({c['state']}), {what}: {fmt.estimate(p)}: "
                      f"{p['difference']} ({p['pairs_higher']} of {p['pairs']} pairs higher)")
    for name, v in out.verdicts.items():
        print(f"  verdict {name}: {v['text']}")
    bench_end(out.comparisons, out.ok, out.failure)
