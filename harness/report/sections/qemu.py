"""QEMU section: the mm_intent kernel's validation (KTAP results, malformed writes, console splats), read from
the typed summary (qemu_validation.validate.ValidateSummary), so a renamed key fails here rather than reading
as missing."""

from __future__ import annotations

from harness.report.context import ReportContext
from qemu_validation.validate import ValidateSummary


def _or_missing(v: object) -> object:
    return "- (not reported)" if v is None else v


def _ktap(t: dict, s: ValidateSummary) -> str:
    """"passed/planned", or "-" with why when the guest never reported a KTAP plan (no "0/0")."""
    if t.get("planned") is None or t.get("passed") is None:
        return "- (no KTAP plan reported" + (f": {s.failure}" if s.failure else "") + ")"
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
        s = ValidateSummary.from_json(run.summary)
        t, k, boot = s.tests or {}, s.kernel or {}, s.boot or {}
        rows.append([suite.label, "PASS" if s.ok else "FAIL", k.get("release") or k.get("label"),
                     "yes" if k.get("kasan_lockdep") else "no", _ktap(t, s),
                     _or_missing(s.malformed_writes), _or_missing(s.errno_mismatches),
                     _or_missing(s.splats), _or_missing(boot.get("seconds")),
                     s.failure or ""])
        ctx.summary.setdefault("qemu", {})[suite.label] = {
            "ok": s.ok, "passed": t.get("passed"), "planned": t.get("planned"),
            "malformed_writes": s.malformed_writes, "splats": s.splats}
        ctx.headline("mm_intent validate", suite.label, s.ok)
        ctx.headline("malformed writes / console splats", suite.label, f"{s.malformed_writes} / {s.splats}")
        failures = t.get("failures") or []
        if failures:
            ctx.doc.para(f"Failed KTAP tests in {run.run_id}: " +
                         "; ".join(f"{f.get('number')} {f.get('name')}: {f.get('reason') or ''}" for f in failures))
    ctx.doc.table(["suite", "result", "kernel", "KASAN + lockdep", "KTAP passed", "malformed writes",
                   "errno mismatches", "console splats", "boot + validate (s)", "failure"], rows)
    ctx.doc.para("The guest boots under TCG with the patched kernel; validation fails on any failed KTAP test, "
                 "an incomplete plan, a non-zero guest status, or an oops, BUG, KASAN report, lockdep splat or "
                 "WARN on the console.")
