"""Every goal kvds judges goes through harness.stats' one rule; these check the sites' own decisions."""

from __future__ import annotations

from qemu_validation import rebuild_bench


def _row(rep: int, total: float, ok: bool = True) -> dict:
    return {"rep": rep, "total_seconds": total, "validate_ok": ok}


def test_rebuild_bench_failed_validate_is_never_met() -> None:
    fast = [_row(1, 40.0), _row(2, 41.0), _row(3, 39.5)]
    assert rebuild_bench.verdict(fast).status == "met"
    broken = [_row(1, 40.0), _row(2, 41.0, ok=False), _row(3, 39.5)]
    v = rebuild_bench.verdict(broken)
    assert v.status == "missed" and "validation failed in repetition 2" in str(v)


def test_rebuild_bench_judges_the_interval_not_the_median() -> None:
    # median 60 s is under 90 s, but three repetitions this far apart cannot say the mean is
    v = rebuild_bench.verdict([_row(1, 60.0), _row(2, 30.0), _row(3, 150.0)])
    assert v.status == "inconclusive" and "[" in str(v)
    assert rebuild_bench.verdict([_row(1, 60.0), _row(2, 61.0)]).status == "inconclusive"  # 2 reps: no interval
    assert rebuild_bench.verdict([_row(1, 200.0), _row(2, 205.0), _row(3, 199.0)]).status == "missed"
