"""The I/O track's goal, judged in one place for a bench and a sweep: a loaded variant meets it when its
stall-free service-time interference (p99 / the unloaded reference's p99 under the same scheduler) is <= 1.5 and
the spill keeps >= 50% of the baseline's MB/s, both judged from their whole 95% intervals, against an unloaded
reference that reproduced itself (its repetitions typically within 1.5x of each other).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from harness import stats
from io_priority.clocks import finite
from io_priority.load_rule import THRESHOLD, not_judged
from io_priority.variant_figures import estimate_of

GOAL_INTERFERENCE = 1.5
GOAL_RETAINED = 0.5


def goal_interference(p: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """What the goal's interference part is judged from: stall-free service-time interference (what the device
    added; the host's wake-up delays and stalls shared by every stream are reported apart), or, for a run recorded
    before the clocks existed, end-to-end interference."""
    if p.get("interference_service") is not None:
        return p["interference_service"], "service-time interference "
    return p.get("interference_factor"), "interference "


def typical_pair_spread(per_rep: Sequence[float]) -> float:
    """How far two repetitions typically lie apart: exp(sqrt(2) x the standard deviation of log per-repetition
    p99), the root-mean-square ratio between two repetitions. Unlike max / min, which grows with every repetition
    added (the range of 7 draws is 1.6x that of 3), it does not drift with the sweep's size, so a larger sweep
    does not turn a steady reference into an "unstable" one by itself."""
    lg = np.log(np.asarray(per_rep, dtype=float))
    return float(math.exp(math.sqrt(2.0) * lg.std(ddof=1)))


def reference_stability(per_sched: dict[str, Any] | None) -> dict[str, stats.Verdict]:
    """Per scheduler: does the unloaded reference reproduce itself within the goal (two of its repetitions'
    p99 typically within 1.5x of each other: typical_pair_spread <= 1.5)? With fewer than MIN_REPS repetitions
    whose p99 is supported the test cannot pass: inconclusive, n too small. The spread is what these
    repetitions showed (an observed fact about them, printed without an interval; max / min beside it)."""
    out = {}
    for sched, doc in (per_sched or {}).items():
        u = doc["modes"].get("unloaded", {})
        key = "per_rep_service_p99_us" if u.get("per_rep_service_p99_us") is not None else "per_rep_p99_us"
        per_rep = [x for x in u.get(key, []) if finite(x) and x > 0]
        what = "service-time p99 (stall-free)" if key == "per_rep_service_p99_us" else "p99"
        goal = f"unloaded {what} spread (rms ratio of two repetitions) <= {GOAL_INTERFERENCE:g}"
        if len(per_rep) < stats.MIN_REPS:
            n_reps = len(u.get(key, []))
            why = (stats.too_few_reps(n_reps) if n_reps < stats.MIN_REPS
                   else f"n too small: {len(per_rep)} of {n_reps} repetitions have a supported p99")
            out[sched] = stats.verdict_of(stats.INCONCLUSIVE, goal, stats.Estimate(math.nan, math.nan, math.nan), why)
            continue
        sp = typical_pair_spread(per_rep)
        status = stats.MET if sp <= GOAL_INTERFERENCE else stats.MISSED
        seen = (f"observed over {len(per_rep)} repetitions, not an estimate; max/min "
                f"{max(per_rep) / min(per_rep):.2f}")
        out[sched] = stats.verdict_of(status, goal, stats.Estimate(sp, math.nan, math.nan, reason=seen), seen)
    return out



def judge(pts: list[dict[str, Any]], per_sched: dict[str, Any] | None) -> None:
    """Each point's verdict (p["goal"]): interference <= 1.5 AND spill kept >= 50%, both from their intervals
    (stats.judge_all); "met" also needs a reference that reproduced itself, else the point is inconclusive.
    The baseline is what the goal is measured against: not judged."""
    ref = reference_stability(per_sched)
    for p in pts:
        if p["variant"] == "baseline":
            p["goal"] = {"status": "reference",
                         "reason": "the baseline (no mapping) is what the goal is measured against"}
            p["meets_goal"] = False
            continue
        inter, label = goal_interference(p)
        e2e = p.get("interference_e2e_stall_free")
        p["end_to_end"] = (stats.judge_at_most(estimate_of(e2e), GOAL_INTERFERENCE, "end-to-end interference ")
                           .as_dict() if e2e is not None else None)  # printed beside the goal, not part of it
        parts = [stats.judge_at_most(estimate_of(inter), GOAL_INTERFERENCE, label),
                 stats.judge_at_least(estimate_of(p.get("spill_retained_est")), GOAL_RETAINED, "spill kept ")]
        status = stats.judge_all(parts)
        if p["scheduler"] in ref:
            # a reference that does not reproduce itself (or has too few repetitions to tell) cannot carry a "met":
            # the point is at best inconclusive; a goal its own intervals miss stays missed
            parts.append(ref[p["scheduler"]])
            if status == stats.MET and not ref[p["scheduler"]].met:
                status = stats.INCONCLUSIVE
        p["goal"] = {"status": status, "parts": [v.as_dict() for v in parts], "text": [str(v) for v in parts]}
        p["meets_goal"] = status == stats.MET


def goal_summary(pts: list[dict[str, Any]], per_sched: dict[str, Any] | None = None) -> dict[str, Any]:
    """Who met, missed, and could not be judged, from the same per-point verdicts the table prints; and the
    yardsticks that say whether the goal was reachable: the unloaded reference's own spread and the best
    clean-read interference among separated points keeping >= 50% of the spill (reads no write touched)."""
    if any("goal" not in p for p in pts):
        judge(pts, per_sched)
    ref = reference_stability(per_sched)
    pair = {s: (v.estimate.value if math.isfinite(v.estimate.value) else None) for s, v in ref.items()}
    spread = {s: _max_over_min(doc) for s, doc in (per_sched or {}).items()}
    judged = [p for p in pts if p["goal"]["status"] != "reference"]
    name = lambda p: f"{p['scheduler']}/{p['variant']}"  # noqa: E731
    met = [name(p) for p in judged if p["goal"]["status"] == stats.MET]
    missed = [name(p) for p in judged if p["goal"]["status"] == stats.MISSED]
    inconclusive = [name(p) for p in judged if p["goal"]["status"] == stats.INCONCLUSIVE and not not_judged(p)]
    busy = [name(p) for p in judged if not_judged(p)]
    # within the goal's numbers but against a reference that does not reproduce itself: listed apart
    unstable = [name(p) for p in judged if p["scheduler"] in ref and ref[p["scheduler"]].status == stats.MISSED
                and all(d["status"] == stats.MET for d in p["goal"]["parts"][:2])]
    clean = [(p["overlap"]["clean_interference_factor"]["value"], name(p), p["overlap"]["clean_interference_factor"])
             for p in judged if p.get("overlap") and p["overlap"].get("clean_interference_factor")
             and finite(p["overlap"]["clean_interference_factor"].get("value"))
             and p["spill_retained"] is not None and p["spill_retained"] >= GOAL_RETAINED]
    best = min(clean, key=lambda c: c[0]) if clean else None
    return {"interference_max": GOAL_INTERFERENCE, "spill_retained_min": GOAL_RETAINED, "met_by": met,
            "missed_by": missed, "inconclusive": inconclusive, "not_judged_host_busy": busy,
            "load_rule": THRESHOLD,
            "met_against_unstable_reference": unstable, "unloaded_p99_spread": spread,
            "unloaded_pair_spread": pair,
            "reference_stable": {s: v.as_dict() for s, v in ref.items()},
            "best_clean_interference": {"value": best[0], "lo": best[2].get("lo"), "hi": best[2].get("hi"),
                                        "point": best[1]} if best else None}


def _max_over_min(doc: dict[str, Any]) -> float | None:
    """max / min of the unloaded reference's per-repetition p99 (the observed range, shown beside the judged
    typical pair spread)."""
    u = doc["modes"].get("unloaded", {})
    key = "per_rep_service_p99_us" if u.get("per_rep_service_p99_us") is not None else "per_rep_p99_us"
    xs = [x for x in u.get(key, []) if finite(x) and x > 0]
    return max(xs) / min(xs) if xs else None


def goal_line(goal: dict[str, Any]) -> str:
    """The one line under every sweep table (terminal and report): met / missed / inconclusive, never a
    claim the rows do not make."""
    met, missed, inc = goal.get("met_by") or [], goal.get("missed_by") or [], goal.get("inconclusive") or []
    return (f"goal (interference <= {goal.get('interference_max')} with spill kept >= "
            f"{goal.get('spill_retained_min')}, interference of stall-free service time, judged from 95% intervals): "
            f"met by "
            f"{', '.join(met) or 'no point of this sweep'}; missed by {', '.join(missed) or 'none'}; "
            f"inconclusive: {', '.join(inc) or 'none'}"
            + (f"; not judged (host busy): {', '.join(busy)}" if (busy := goal.get("not_judged_host_busy")) else ""))


def verdict_cell(p: dict[str, Any]) -> str:
    g = p.get("goal") or {}
    if g.get("status") == "reference":
        return "reference"
    if not_judged(p):
        return "not judged: host busy"
    return g.get("status", "-")
