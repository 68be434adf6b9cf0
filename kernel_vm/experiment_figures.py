"""Figures the three mechanism experiments (`kvds vm lazy`, `kvds vm churn`, `kvds vm overcommit`) share: a
per-repetition count with its interval, and a mechanism judged against the reference mechanism by interval.

Repetition r of every mechanism ran in the same alternating round (and, where there is a layout, with the same
layout seed), so differences and ratios are taken pair by pair: a slow round both sides shared cancels.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from harness import stats



def counts(per_rep: Sequence[float]) -> dict[str, Any]:
    """{per_rep, mean{value, lo, hi}}: a count per repetition and its mean with a t interval (floor 0)."""
    return {"per_rep": [float(x) for x in per_rep], "mean": stats.mean_ci(list(per_rep), floor=0.0).as_dict()}


def paired_difference(a: Sequence[float], b: Sequence[float]) -> stats.Estimate:
    """mean(a_r - b_r) over the repetitions both sides have, with a t interval."""
    k = min(len(a), len(b))
    return stats.mean_ci([float(x) - float(y) for x, y in zip(a[:k], b[:k])])


def judge_below(e: stats.Estimate, label: str, limit: float = 0.0) -> stats.Verdict:
    """Goal: strictly below `limit` (a difference below 0: the mechanism needs less than the reference). Met when
    the whole interval is below, missed when none of it is (an interval pinned at [0, 0]: exactly as much, no
    advantage), inconclusive otherwise or without an interval."""
    goal = f"{label} < {limit:g}".strip()
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return stats.verdict_of(stats.INCONCLUSIVE, goal, e, e.reason or "no interval")
    if e.hi < limit:
        return stats.verdict_of(stats.MET, goal, e, "")
    if e.lo >= limit:
        return stats.verdict_of(stats.MISSED, goal, e, "")
    return stats.verdict_of(stats.INCONCLUSIVE, goal, e, "")


def ratio_below_one(a: Sequence[float], b: Sequence[float], label: str) -> stats.Verdict:
    """mean(a) / mean(b) of per-repetition costs, judged < 1 (a costs less than b) by its interval."""
    return judge_below(stats.rep_mean_ratio(list(a), list(b)), label, 1.0)


def p99_us(groups: Sequence[np.ndarray]) -> dict[str, Any]:
    """Pooled p99 of per-repetition latencies (ns) in us, cluster-bootstrap interval over repetitions."""
    e = stats.rep_percentiles(list(groups), (99.0,))[99.0]
    d = e.as_dict()
    return {k: (v / 1000.0 if k in ("value", "lo", "hi") and v is not None else v) for k, v in d.items()}
