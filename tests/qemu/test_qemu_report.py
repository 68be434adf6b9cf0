"""The report's QEMU section (qemu_validation/report_section.py): the edit -> validated kernel goal read from
rebuild-time runs, including runs stored under the kind they had before the rename (`qemu-bench`), judged by
rebuild_time_run.verdict and handed to the Summary through ReportContext.headline / .verdict. No kernel is built."""

from __future__ import annotations

from pathlib import Path

from harness.report.context import ReportContext, load_suites
from harness.report.document import Document
from harness.results import ResultStore
from qemu_validation import rebuild_time_run, report_section


def _timed_run(store: ResultStore, kind: str, totals: list[float], ok: bool = True) -> str:
    reps = [{"rep": i + 1, "total_seconds": t, "build_seconds": 10.0, "boot_validate_seconds": t - 10.0,
             "validate_ok": ok} for i, t in enumerate(totals)]
    run = store.new_run(kind, {})
    run.write_summary({"reps": reps, "median_total_seconds": sorted(totals)[len(totals) // 2],
                       "median_build_seconds": 10.0, "median_boot_validate_seconds": 50.0, "profile": "quick"})
    return run.run_id


def _render(store: ResultStore, refs: list[str], tmp_path: Path) -> tuple[ReportContext, str]:
    ctx = ReportContext(load_suites(refs, store), Document(tmp_path), tmp_path)
    report_section.render(ctx)
    return ctx, ctx.doc.markdown()


def test_a_run_under_the_old_kind_is_still_judged(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    old = _timed_run(store, rebuild_time_run.LEGACY_KIND, [60.0, 61.0, 59.0])
    ctx, md = _render(store, [old], tmp_path)
    (label,) = [s.label for s in ctx.suites]
    line = ctx.verdicts[label][report_section.REBUILD_GOAL]
    assert line.startswith("met (goal edit -> validated kernel, quick validate (s) <= 90") and old in md
    assert ctx.headlines[f"{report_section.REBUILD_GOAL}, median (s)"][label] == 60.0


def test_the_newest_run_of_either_kind_is_shown_and_a_failed_validate_is_missed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    old = _timed_run(store, rebuild_time_run.LEGACY_KIND, [60.0, 61.0, 59.0])
    new = _timed_run(store, rebuild_time_run.KIND, [60.0, 61.0, 59.0], ok=False)
    ctx, md = _render(store, [old, new], tmp_path)
    (suite,) = ctx.suites
    # run ids begin with their start time (and "qemu-bench" sorts before "qemu-rebuild-time" within a second)
    assert report_section.latest_rebuild_time(suite).run_id == new and new in md and old not in md
    line = ctx.verdicts[suite.label][report_section.REBUILD_GOAL]
    assert line.startswith("missed") and "validation failed in repetition 1, 2, 3" in line


def test_a_stored_goal_met_is_rejudged_by_todays_rule(tmp_path: Path) -> None:
    """A run recorded as met (an older rule) whose repetition failed validate is missed by today's rule."""
    store = ResultStore(tmp_path / "results")
    run = store.new_run(rebuild_time_run.LEGACY_KIND, {})
    run.write_summary({"reps": [{"rep": 1, "total_seconds": 40.0, "validate_ok": False},
                                {"rep": 2, "total_seconds": 41.0, "validate_ok": True},
                                {"rep": 3, "total_seconds": 40.0, "validate_ok": True}], "goal_met": True})
    ctx, md = _render(store, [run.run_id], tmp_path)
    (label,) = [s.label for s in ctx.suites]
    assert ctx.verdicts[label][report_section.REBUILD_GOAL].startswith("missed") and "full validate" in md


def test_no_qemu_runs_no_section(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    other = store.new_run("io-bench", {})
    other.write_summary({})
    ctx, md = _render(store, [other.run_id], tmp_path)
    assert md.strip() == "" and not ctx.verdicts and not ctx.headlines
