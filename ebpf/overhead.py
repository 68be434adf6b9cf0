"""The probes' overhead goal: with the blk probes attached, a single-threaded O_DIRECT read loop keeps >= 95% of its
IOPS, judged by harness.stats' one rule (met only when the whole interval is >= 0.95) on the geometric mean of the
paired with/without ratios (a t interval on their logarithms): on a loaded host a pair's ratio swings both ways, and
the arithmetic mean of ratios leans upward. `kvds ebpf overhead` (ebpf/overhead_run.py) measures; the report
(ebpf/report_section.py) re-judges stored runs with `summary_verdict`."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness import stats

from ebpf.summary import OverheadSummary

GOAL_IOPS_KEPT = 0.95  # probes may cost at most 5% of a single-threaded O_DIRECT read loop's IOPS


def paired_ratio(ratios: Any) -> stats.Estimate:
    """Geometric mean of per-pair ratios with a Student t interval on their logs (none below MIN_REPS pairs)."""
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r) & (r > 0)]
    if not r.size:
        return stats.Estimate(float("nan"), float("nan"), float("nan"), reason="no data", n=0)
    e = stats.mean_ci(list(np.log(r)))
    lo, hi = (float(np.exp(x)) if x == x else float("nan") for x in (e.lo, e.hi))
    return stats.Estimate(float(np.exp(e.value)), lo, hi, e.conf, e.reason, int(r.size))


def verdict(ratio: stats.Estimate) -> stats.Verdict:
    """IOPS with the probes / without, per repetition pair: at least GOAL_IOPS_KEPT over the whole interval."""
    return stats.judge_at_least(ratio, GOAL_IOPS_KEPT, "IOPS with/without ")


def summary_verdict(s: OverheadSummary) -> stats.Verdict:
    """The goal re-judged from a stored run (OverheadSummary.from_json) with today's rule: from the geometric
    mean's estimate, or (a run from before it was stored) recomputed from the per-repetition IOPS."""
    if s.ratio_geomean:
        g = s.ratio_geomean
        return verdict(stats.Estimate(_nan(g.get("value")), _nan(g.get("lo")), _nan(g.get("hi")), g.get("conf", 0.95),
                                      g.get("reason", "")))
    wo, wi = s.iops_without or [], s.iops_with or []
    return verdict(paired_ratio([b / a for a, b in zip(wo, wi) if a]))


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)
