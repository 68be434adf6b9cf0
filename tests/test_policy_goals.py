"""`kvds policy goals`: the verdict rule applied to issue 14's figures (synthetic per-seed metrics)."""
from __future__ import annotations

from harness.policy import goals as g

HI_MISS = next(x for x in g.GOALS if x.what == "hi_miss")


def _per(hi_miss: list[float]) -> dict[str, list[dict]]:
    return {g.WITH_KNOB: [{"hi_miss_ratio": x} for x in hi_miss],
            g.BASELINE: [{"hi_miss_ratio": 0.1} for _ in hi_miss]}


def test_a_high_priority_miss_interval_never_goes_below_zero() -> None:
    """Five seeds, one of them an outlier: a plain t interval reaches below 0, which no miss ratio can."""
    v = g.judge(HI_MISS, _per([0.0, 0.0, 0.0, 0.0, 0.004]))
    assert v.estimate.lo == 0.0 and v.estimate.value == 0.0008
    assert v.status == "met"                                   # the whole [0, 0.003] lies below 0.005


def test_the_floor_does_not_decide_the_upper_end() -> None:
    v = g.judge(HI_MISS, _per([0.0, 0.0, 0.0, 0.0, 0.01]))
    assert v.estimate.lo == 0.0 and v.estimate.hi > HI_MISS.limit
    assert v.status == "inconclusive"
