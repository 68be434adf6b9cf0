"""The guest lab's tables: what `kvds qemu VERB` prints without --json, from the same summary --json emits
(harness/emit.py). Printing only: the figures are computed by each verb's module."""

from __future__ import annotations

import shlex
import statistics
from pathlib import Path
from typing import Any, Mapping

from harness.results import Run

STATES = ("unused", "one", "many")   # exit_bench.STATES: the registry states, in the order printed


def build_result(b: Mapping[str, Any]) -> None:
    print(f"{b['id']} {b['label']} {'(cached)' if b['cached'] else ''}\n  {b['bzImage']}")


def build_list(s: Mapping[str, Any]) -> None:
    for r in s["builds"]:
        phases = ", ".join(f"{k} {v} s" for k, v in (r["phases"] or {}).items())
        print(f"{r['id']}  {r['label']:<36} {r['release']}  built in {r['build_seconds']} s"
              + (f" ({phases})" if phases else ""))


def prune(out: Mapping[str, Any]) -> None:
    dry = out["dry_run"]
    for r in out["removed"]:
        print(f"{'would remove' if dry else 'removed'} {r['what']}: {r['bytes'] / 2**30:.2f} GiB  {r['path']}")
    print(f"{'would free' if dry else 'freed'} {out['freed_bytes'] / 2**30:.2f} GiB")


def dry_run(p: Mapping[str, Any]) -> None:
    k = p["kernel"]
    print(f"kernel {k['label']}" + (f" ({k['id'][:12]})" if k["built"] else " (not built: the run builds it first)"))
    print(f"guest command (the initramfs's /init runs it): {shlex.join(p['guest_argv'])}")
    print("$ " + shlex.join(p["qemu_argv"]))


def phases(rows: list[dict], title: str) -> None:
    if rows:
        print(f"  {title}:")
        for p in rows:
            print(f"    {p['phase']:<66} {p['seconds']:>7.1f} s")


def validate(s: Mapping[str, Any], path: Path | str) -> None:
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
    phases(s.get("phases") or [], "where the time went (guest clock)")
    for f in t["failures"]:
        print(f"  not ok {f['number']} {f['name']}: {f['reason']}")
        for d in f["diagnostics"][:8]:
            print(f"      # {d}")
    for f in s["findings"][:3]:
        print(f"  {f['kind']}: {f['line']}")
    if s["failure"]:
        print(f"  failure: {s['failure']}")


def kernel_heading(k: Mapping[str, Any]) -> str:
    """One kernel's line in a guest bench's table (exit-bench, reclaim-bench)."""
    what = ("debug" if k["debug"] else "base") + (", mm_intent" if k["mm_intent"] else ", no mm_intent")
    return f"  {k['id']} {k['label']} ({k['release']}; {what}; {k['boots']} boots)"


def print_end(out: Mapping[str, Any], run: Run | Path | str) -> int:
    """A guest bench's kernel-vs-kernel ratios, its results path and failure; returns the exit status."""
    for c in out["comparisons"]:
        print(f"  {c['kernel']} / {c['reference']} ({c['state']}): {c['text']}: {c['difference']}")
    print(f"  results: {run.path if isinstance(run, Run) else run}")
    if not out["ok"]:
        print(f"  failure: {out['failure'] or 'the benchmark did not finish'}")
    return 0 if out["ok"] else 1


def exit_bench(out: Mapping[str, Any], run: Run | Path | str, reps: int) -> None:
    print(f"fork+exit+wait, {out['iterations']} per state per boot, {reps} boot(s) per kernel in alternating "
          f"order; mean of per-boot medians [95% interval over boots], ms:")
    for k in out["kernels"]:
        print(kernel_heading(k))
        for s in STATES:
            r = k["vs_unused"].get(s)
            vs = (f"  vs unused (per boot) {r['text']}: {r['difference']}; higher in {r['boots_higher']} of "
                  f"{r['boots']} boots" if r else "")
            print(f"    {s:>7}: {k['median_ms'][s]['text']}{vs}")
    print_end(out, run)


def rebuild_time(out: Mapping[str, Any], path: Path | str, target_file: str) -> None:
    c = out["counts"]
    print(f"edit -> rebuild -> boot -> validate on {out['base_kernel']['label']} ({out['base_kernel']['release']}; "
          f"one line of {target_file} changed per rep); {out['profile']} validate: {c['fuzz']:,} "
          f"malformed + {c['valid']:,} well-formed lines, {c['concurrent_s']} s concurrent"
          + ("" if out["gate"] else " (the edit loop, not the gate)"))
    print(f"  {'rep':>3}  {'build s':>8}  {'compiled':>8}  {'boot+validate s':>15}  {'total s':>8}  validate")
    for r in out["reps"]:
        print(f"  {r['rep']:>3}  {r['build_seconds']:>8.1f}  {len(r['compiled']):>8}  {r['boot_validate_seconds']:>15.1f}  "
              f"{r['total_seconds']:>8.1f}  {'PASS' if r['validate_ok'] else 'FAIL'} ({r['splats']} splats)")
    print(f"  median {out['median_total_seconds']} s (build {out['median_build_seconds']} s, boot+validate "
          f"{out['median_boot_validate_seconds']} s); verdict: {out['goal_text']}; results: {path}")
    phases(out["median_guest_phases"], f"where boot+validate goes (median of {len(out['reps'])} reps)")
    for r in out["reps"]:
        if not r["validate_ok"]:
            print(f"  rep {r['rep']} failed validate: {r['validate_failure']} (run {r['validate_run']})")


def reclaim_bench(out: Mapping[str, Any], run: Run | Path | str, reps: int) -> None:
    print(f"memory.reclaim of a {out['arena_mb']} MiB arena (faulted back in each round), {out['rounds']} rounds per "
          f"state per boot, {reps} boot(s) per kernel in alternating order; mean of per-boot medians "
          f"[95% interval over boots], ms per round:")
    for k in out["kernels"]:
        print(kernel_heading(k))
        for s, m in k["median_ms"].items():
            per = k["per_boot"][s]
            extra = (f"; critical pages swapped (worst round) {max(b['max_swapped_critical'] for b in per)}, "
                     f"other half swapped (fewest) {min(b['min_swapped_other'] for b in per)}") if s == "critical" else ""
            steal = [b["median_pgsteal"] for b in per]
            scan = [b["median_pgscan"] for b in per]
            print(f"    {s:>8}: {m['text']}  pgscan {statistics.median(scan):.0f}, pgsteal "
                  f"{statistics.median(steal):.0f} per round (median over boots){extra}")
            if s in k["median_norm"]:
                print(f"    {'':>8}  normalised (ns / reference loop ns): {k['median_norm'][s]['text']}")
        for pair, r in k["cost"].items():
            w = k["cost_within_boot"][pair]
            print(f"    {pair}: {r['text']}: {r['difference']}; within each boot {w['text']}: {w['difference']}")
            if pair in k["cost_within_boot_norm"]:
                n = k["cost_within_boot_norm"][pair]
                print(f"    {'':>{len(pair)}}  normalised, within each boot {n['text']}: {n['difference']}")
    for c in out["comparisons"]:
        for kind, what in (("paired", "paired by repetition"), ("paired_norm", "paired, normalised")):
            if c.get(kind):
                p = c[kind]
                print(f"  {c['kernel']} / {c['reference']} ({c['state']}), {what}: {p['text']}: {p['difference']} "
                      f"({p['pairs_higher']} of {p['pairs']} pairs higher)")
    for name, v in out["verdicts"].items():
        print(f"  verdict {name}: {v['text']}")
    print_end(out, run)
