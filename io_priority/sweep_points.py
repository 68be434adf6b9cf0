"""A sweep's points: every (scheduler, loaded variant) as spill MB/s against critical-read p99, judged against
the goal (goal.py), with the Pareto frontier marked: a point is on it when no other point of the sweep is at least
as good on both (lower p99, higher MB/s) and better on one.
"""

from __future__ import annotations

from typing import Any

from io_priority.clocks import finite
from io_priority.goal import goal_summary, judge
from io_priority.summary import SweepPoint


def points(per_sched: dict[str, Any]) -> list[dict[str, Any]]:
    """Every scheduler x loaded variant of `per_sched` (scheduler -> {"modes": variant figures}) as a typed,
    judged SweepPoint dict, the Pareto frontier marked."""
    out = []
    for sched, doc in per_sched.items():
        for label, m in doc["modes"].items():
            if label == "unloaded":
                continue
            out.append({
                "scheduler": sched, "variant": label, "mapping": m["mapping"],
                "p99_us": m["latency_us"]["p99"], "p50_us": m["latency_us"]["p50"],
                "interference_factor": m["interference_factor"], "spill_mb_s": m["spill_mb_s"],
                "spill_retained": m["spill_retained"], "spill_retained_est": m.get("spill_retained_est"),
                "overlap": m.get("overlap"),
                # three clocks, without the reads stalls delayed: the goal is judged on service time
                "interference_service": _sf(m, "service"), "interference_e2e_stall_free": _sf(m, "end_to_end"),
                "excess": (m.get("stall_free") or {}).get("excess"),
                "stalls": (m.get("stalls") or {}).get("stalls"),
                "reps": m.get("reps"),  # auto-grow gives the points still wide more repetitions than the rest
            })
    for p in out:
        p["pareto"] = (None if p99(p) is None or mb_s(p) is None
                       else not any(_dominates(q, p) for q in out if q is not p and p99(q) is not None
                                    and mb_s(q) is not None))
    judge(out, per_sched)
    # every key through the typed point: a key the dataclass does not name fails here, not in a reader
    return [SweepPoint(**p).as_dict() for p in out]


def _sf(m: dict[str, Any], clock: str) -> dict[str, Any] | None:
    """A variant's stall-free interference on one clock (None for a run recorded before the clocks)."""
    return ((m.get("stall_free") or {}).get("interference") or {}).get(clock)


def p99(p: dict[str, Any]) -> float | None:
    v = (p.get("p99_us") or {}).get("value")
    return v if finite(v) else None


def mb_s(p: dict[str, Any]) -> float | None:
    v = (p.get("spill_mb_s") or {}).get("value")
    return v if finite(v) else None


def _dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ap, bp = p99(a), p99(b)
    am, bm = mb_s(a), mb_s(b)
    return ap <= bp and am >= bm and (ap < bp or am > bm)


def bench_goal(scheduler: str, modes: dict[str, Any],
               judged: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """A bench's "separated" (and every other loaded variant) judged by the sweep's rule, so a bench and a sweep
    of the same point give the same verdict; None unless the bench ran all three of unloaded, baseline, separated.
    judged: the points as the load rule judged them (io_priority/load_rule.py), else judged from every repetition."""
    if not {"unloaded", "baseline", "separated"} <= set(modes):
        return None
    per = {scheduler: {"modes": modes}}
    pts = judged if judged is not None else points(per)
    out = goal_summary(pts, per)
    out["verdicts"] = {p["variant"]: {"status": p["goal"]["status"], "text": p["goal"]["text"],
                                      "end_to_end": p.get("end_to_end"), "load": p["goal"].get("load")}
                       for p in pts if p["variant"] != "baseline"}
    return out
