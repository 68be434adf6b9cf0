"""The report's QEMU section (registered as `kvds.report_sections` 40-qemu): the mm_intent kernel's validation
(KTAP results, malformed writes, console splats) and the edit -> validated kernel time, each read from its typed
summary (validate.ValidateSummary, rebuild_time_run.RebuildTimeSummary), so a renamed key fails here rather than
reading as missing. Headline figures and verdict lines go to the Summary through ReportContext."""

from __future__ import annotations

from harness.report.context import ReportContext, Suite
from harness.results import Run
from qemu_validation import rebuild_time_run
from qemu_validation.rebuild_time_run import RebuildTimeSummary
from qemu_validation.validate_run import ValidateSummary

REBUILD_GOAL = "edit -> rebuild -> boot -> validate"


def _or_missing(v: object) -> object:
    return "- (not reported)" if v is None else v


def _ktap(t: dict, s: ValidateSummary) -> str:
    """"passed/planned", or "-" with why when the guest never reported a KTAP plan (no "0/0")."""
    if t.get("planned") is None or t.get("passed") is None:
        return "- (no KTAP plan reported" + (f": {s.failure}" if s.failure else "") + ")"
    return f"{t['passed']}/{t['planned']}"


def latest_rebuild_time(suite: Suite) -> Run | None:
    """The newest finished rebuild-time run of a suite, under its kind or the kind it had before the rename
    (rebuild_time_run.KINDS): run ids begin with their start time, so the larger id is the newer run."""
    runs = [r for r in (suite.latest(k) for k in rebuild_time_run.KINDS) if r is not None]
    return max(runs, key=lambda r: r.run_id) if runs else None


def render(ctx: ReportContext) -> None:
    validated = any(s.of_kind("qemu-validate") for s in ctx.suites)
    timed = [(suite, latest_rebuild_time(suite)) for suite in ctx.suites]
    if not validated and not any(run for _, run in timed):
        return
    ctx.doc.heading("mm_intent kernel interface: QEMU validation")
    if validated:
        _validate(ctx)
    if any(run for _, run in timed):
        _rebuild_time(ctx, timed)


def _validate(ctx: ReportContext) -> None:
    rows = []
    for suite, run in ctx.latest("qemu-validate"):
        s = ValidateSummary.from_json(run.summary)
        t, k, boot = s.tests or {}, s.kernel or {}, s.boot or {}
        lines = " + ".join("-" if n is None else f"{n:,}" for n in (s.malformed_writes, s.valid_writes))
        profile = "gate" if s.gate else f"quick ({lines} lines: not the gate)"
        rows.append([suite.label, "PASS" if s.ok else "FAIL", profile, k.get("release") or k.get("label"),
                     "yes" if k.get("kasan_lockdep") else "no", _ktap(t, s),
                     _or_missing(s.malformed_writes), _or_missing(s.errno_mismatches),
                     _or_missing(s.splats), _or_missing(boot.get("seconds")),
                     s.failure or ""])
        ctx.summary.setdefault("qemu", {})[suite.label] = {
            "ok": s.ok, "passed": t.get("passed"), "planned": t.get("planned"),
            "malformed_writes": s.malformed_writes, "splats": s.splats, "gate": s.gate}
        ctx.headline("mm_intent validate", suite.label, s.ok)
        ctx.headline("malformed writes / console splats", suite.label, f"{s.malformed_writes} / {s.splats}")
        failures = t.get("failures") or []
        if failures:
            ctx.doc.para(f"Failed KTAP tests in {run.run_id}: " +
                         "; ".join(f"{f.get('number')} {f.get('name')}: {f.get('reason') or ''}" for f in failures))
    ctx.doc.table(["suite", "result", "profile", "kernel", "KASAN + lockdep", "KTAP passed", "malformed writes",
                   "errno mismatches", "console splats", "boot + validate (s)", "failure"], rows)
    ctx.doc.para("The guest boots under TCG with the patched kernel; validation fails on any failed KTAP test, "
                 "an incomplete plan, a non-zero guest status, or an oops, BUG, KASAN report, lockdep splat or "
                 "WARN on the console.")


def _rebuild_time(ctx: ReportContext, timed: list[tuple[Suite, Run | None]]) -> None:
    """The edit -> validated kernel goal, re-judged from the stored repetitions with today's rule
    (rebuild_time_run.verdict: the mean total's interval, never met when a repetition failed validate)."""
    rows = []
    for suite, run in timed:
        if run is None:
            continue
        s = RebuildTimeSummary.from_json(run.summary)
        v = rebuild_time_run.verdict(s.reps or [], s.profile or "full")
        rows.append([suite.label, run.run_id, s.profile or "full", _or_missing(s.median_build_seconds),
                     _or_missing(s.median_boot_validate_seconds), _or_missing(s.median_total_seconds), str(v)])
        ctx.headline(f"{REBUILD_GOAL}, median (s)", suite.label, s.median_total_seconds)
        ctx.verdict(suite.label, REBUILD_GOAL, str(v))
    ctx.doc.para(f"{REBUILD_GOAL} (`kvds qemu rebuild-time`): a one-line change to the mm_intent series, rebuilt "
                 f"in the warm tree, booted and validated; goal {rebuild_time_run.GOAL_SECONDS:g} s. Met only when the "
                 "whole 95% interval of the mean total is within it; a failed validation is never met.")
    ctx.doc.table(["suite", "run", "validate profile", "build (s)", "boot + validate (s)", "total (s)", "verdict"],
                  rows)
