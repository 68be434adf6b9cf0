"""Every goal kvds judges goes through harness.stats' one rule; these check the sites' own decisions."""

from __future__ import annotations

from qemu_validation import rebuild_time_run


def _row(rep: int, total: float, ok: bool = True) -> dict:
    return {"rep": rep, "total_seconds": total, "validate_ok": ok}


def test_rebuild_time_failed_validate_is_never_met() -> None:
    fast = [_row(1, 40.0), _row(2, 41.0), _row(3, 39.5)]
    assert rebuild_time_run.verdict(fast).status == "met"
    broken = [_row(1, 40.0), _row(2, 41.0, ok=False), _row(3, 39.5)]
    v = rebuild_time_run.verdict(broken)
    assert v.status == "missed" and "validation failed in repetition 2" in str(v)


def test_rebuild_time_judges_the_interval_not_the_median() -> None:
    # median 60 s is under 90 s, but three repetitions this far apart cannot say the mean is
    v = rebuild_time_run.verdict([_row(1, 60.0), _row(2, 30.0), _row(3, 150.0)])
    assert v.status == "inconclusive" and "[" in str(v)
    assert rebuild_time_run.verdict([_row(1, 60.0), _row(2, 61.0)]).status == "inconclusive"  # 2 reps: no interval
    assert rebuild_time_run.verdict([_row(1, 200.0), _row(2, 205.0), _row(3, 199.0)]).status == "missed"


def test_fio_check_is_two_sided() -> None:
    from harness.stats import Estimate
    from io_priority.fio import verdict

    assert verdict(Estimate(0.5, 0.45, 0.55)).status == "missed"  # a reader that under-reports by half
    assert verdict(Estimate(1.5, 1.4, 1.6)).status == "missed"
    assert verdict(Estimate(1.02, 0.95, 1.08)).status == "met"
    # the old rule (ratio <= 1.10) passed this one: a point of 0.945 whose interval spans 0.06-16
    assert verdict(Estimate(0.945, 0.0559, 15.97)).status == "inconclusive"


def test_ebpf_overhead_from_the_interval() -> None:
    from ebpf.overhead import paired_ratio, verdict

    assert verdict(paired_ratio([0.98, 0.99, 0.985, 0.99])).status == "met"
    assert verdict(paired_ratio([0.80, 0.82, 0.79, 0.81])).status == "missed"
    assert verdict(paired_ratio([0.99, 0.98])).status == "inconclusive"  # 2 pairs: no interval
    assert "n too small" in str(verdict(paired_ratio([0.99, 0.98])))
    # pairs swinging both ways by 2x: the arithmetic mean of ratios says 1.25, the geometric mean 1.0
    assert abs(paired_ratio([0.5, 2.0, 0.5, 2.0]).value - 1.0) < 1e-9


def test_report_rejudges_stored_runs_by_todays_rule() -> None:
    """The tracks' report sections judge a stored run again with today's rule, whatever it stored as met."""
    from ebpf.overhead import OverheadSummary
    from ebpf.overhead import summary_verdict as overhead_verdict
    from io_priority.fio import summary_verdict as fio_verdict

    old_fio = {"p50_ratio_kvds_over_fio": {"value": 0.945, "lo": 0.0559, "hi": 15.97}, "meets_goal": True}
    assert fio_verdict(old_fio).status == "inconclusive"
    old_overhead = {"ratio_mean": 0.9, "ratio_ci95": [None, None], "reps": 2, "iops_without": [100.0, 100.0],
                    "iops_with": [90.0, 91.0]}
    assert overhead_verdict(OverheadSummary.from_json(old_overhead)).status == "inconclusive"
    # the rebuild-time goal is re-judged by the qemu section now: tests/qemu/test_qemu_report.py
