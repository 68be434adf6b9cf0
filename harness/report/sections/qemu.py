"""QEMU section: the mm_intent kernel's validation (KTAP results, malformed writes, console splats)."""

from __future__ import annotations

from harness.report.context import ReportContext


def _or_missing(v: object) -> object:
    return "- (not reported)" if v is None else v


def _ktap(t: dict, s: dict) -> str:
    """"passed/planned", or "-" with why when the guest never reported a KTAP plan (no "0/0")."""
    if t.get("planned") is None or t.get("passed") is None:
        return "- (no KTAP plan reported" + (f": {s['failure']}" if s.get("failure") else "") + ")"
    return f"{t['passed']}/{t['planned']}"


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("qemu-validate") for s in ctx.suites):
        return
    ctx.doc.heading("mm_intent kernel interface: QEMU validation")
    rows = []
    for suite in ctx.suites:
        run = suite.latest("qemu-validate")
        if run is None:
            continue
        s = run.summary
        t = s.get("tests", {})
        k = s.get("kernel", {})
        boot = s.get("boot", {})
        rows.append([suite.label, "PASS" if s.get("ok") else "FAIL", k.get("release") or k.get("label"),
                     "yes" if k.get("kasan_lockdep") else "no", _ktap(t, s),
                     _or_missing(s.get("malformed_writes")), _or_missing(s.get("errno_mismatches")),
                     _or_missing(s.get("splats")), _or_missing(boot.get("seconds")),
                     s.get("failure") or ""])
        ctx.summary.setdefault("qemu", {})[suite.label] = {
            "ok": s.get("ok"), "passed": t.get("passed"), "planned": t.get("planned"),
            "malformed_writes": s.get("malformed_writes"), "splats": s.get("splats")}
        failures = t.get("failures") or []
        if failures:
            ctx.doc.para(f"Failed KTAP tests in {run.run_id}: " +
                         "; ".join(f"{f.get('number')} {f.get('name')}: {f.get('reason') or ''}" for f in failures))
    ctx.doc.table(["suite", "result", "kernel", "KASAN + lockdep", "KTAP passed", "malformed writes",
                   "errno mismatches", "console splats", "boot + validate (s)", "failure"], rows)
    ctx.doc.para("The guest boots under TCG with the patched kernel; validation fails on any failed KTAP test, "
                 "an incomplete plan, a non-zero guest status, or an oops, BUG, KASAN report, lockdep splat or "
                 "WARN on the console.")
