"""Host runs judged with their load: a verdict rests only on repetitions the host ran quietly.

Every repetition carries the host's load over its duration (io_priority/host_load.py: other work's CPU, steal). A
repetition is *busy* above the stated threshold (FOREIGN_CORES_LIMIT cores of other work or STEAL_LIMIT steal).
The rule, per point (a loaded variant under one scheduler, judged against that scheduler's unloaded reference and
baseline):

- no busy repetition: the verdict as judged, worded "met on stall-free, unloaded repetitions (all N)";
- some busy: the busy repetitions are set aside and the point is judged again from the quiet ones, when the point,
  its reference and its baseline each keep at least stats.MIN_REPS of them (its figures are then the quiet ones');
- otherwise: "not judged: host busy" (status inconclusive), with the all-repetition interval printed beside it.

So a verdict never flips between met and missed with what else ran on the machine: a loaded host can only make a
point not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness import stats
from io_priority.host_load import FOREIGN_CORES_LIMIT, STEAL_LIMIT
from io_priority.workload import RepResult

REFERENCES = ("unloaded", "baseline")
NOT_JUDGED = "not judged: host busy"
THRESHOLD = (f"a repetition is busy when other work took > {FOREIGN_CORES_LIMIT:g} cores or steal > "
             f"{STEAL_LIMIT:.0%} over it")

Results = dict[str, list[RepResult]]
Order = list[tuple[int, str]]


@dataclass(frozen=True)
class SchedRuns:
    """One scheduler's repetitions as run: per variant label its results, and the (rep, label) order."""
    results: Results
    order: Order


def _busy(r: RepResult) -> bool:
    return r.host_load is not None and r.host_load.busy


def variant_load(reps: list[RepResult]) -> dict[str, Any] | None:
    """VariantFigures.host_load: each repetition's load sample, how many were busy, and the threshold."""
    samples = [r.host_load for r in reps if r.host_load is not None]
    if not samples:
        return None
    return {"per_rep": [s.as_dict() for s in samples], "busy_reps": sum(s.busy for s in samples),
            "foreign_cores_max": max(s.foreign_cores for s in samples),
            "steal_share_max": max(s.steal_share for s in samples), "threshold": THRESHOLD}


def quiet_subset(runs: SchedRuns) -> SchedRuns:
    """The repetitions the host ran quietly; the order keeps their (rep, label) entries, so the k-th quiet result
    of a label is still its k-th entry in the order and side-by-side pairing (pairing.py) still holds."""
    seen: dict[str, int] = {}
    results: Results = {label: [] for label in runs.results}
    order: Order = []
    for rep, label in runs.order:
        k = seen.get(label, 0)
        seen[label] = k + 1
        reps = runs.results.get(label, [])
        if k < len(reps) and not _busy(reps[k]):
            results[label].append(reps[k])
            order.append((rep, label))
    return SchedRuns(results, order)


def _counts(results: Results, labels: tuple[str, ...]) -> tuple[int, int]:
    """(busy, all) repetitions over the variants a point is judged from."""
    reps = [r for label in labels for r in results.get(label, [])]
    return sum(_busy(r) for r in reps), len(reps)


def judge_points(pts: list[dict[str, Any]], runs: dict[str, SchedRuns],
                 quiet_points: Callable[[dict[str, SchedRuns]], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each point's verdict by the rule above (`pts`: judged from every repetition; `quiet_points`: the same
    points computed from given repetitions, called once with the quiet ones when any repetition was busy). Every
    returned point's goal carries `load`: busy and total repetitions it rests on, what it was judged from, the
    wording printed."""
    busy_any = any(_busy(r) for sr in runs.values() for reps in sr.results.values() for r in reps)
    quiet = {s: quiet_subset(sr) for s, sr in runs.items()} if busy_any else {}
    usable = {s: {label for label, reps in q.results.items() if len(reps) >= stats.MIN_REPS} for s, q in quiet.items()}
    rejudged = {}
    if busy_any:
        subset = {s: SchedRuns({label: q.results[label] for label in usable[s]},
                               [(r, label) for r, label in q.order if label in usable[s]])
                  for s, q in quiet.items() if set(REFERENCES) <= usable[s]}
        rejudged = {(p["scheduler"], p["variant"]): p for p in quiet_points(subset)} if subset else {}
    out = []
    for p in pts:
        labels = (p["variant"], *REFERENCES)
        busy, total = _counts(runs[p["scheduler"]].results, labels)
        status = p["goal"]["status"]
        if status == "reference":
            out.append(p)
            continue
        if busy == 0:
            load = {"judged_on": "all repetitions", "verdict": f"{status} on stall-free, unloaded repetitions "
                    f"(all {total})"}
            q = p
        elif (key := (p["scheduler"], p["variant"])) in rejudged and p["variant"] in usable[p["scheduler"]]:
            q = rejudged[key]
            load = {"judged_on": "quiet repetitions", "verdict": f"{q['goal']['status']} on stall-free, unloaded "
                    f"repetitions ({total - busy} of {total}; {busy} on a busy host set aside)"}
        else:
            q = {**p, "goal": {**p["goal"], "status": stats.INCONCLUSIVE, "all_reps_status": status},
                 "meets_goal": False}
            load = {"judged_on": None, "verdict": f"{NOT_JUDGED} ({busy} of {total} repetitions busy; fewer than "
                    f"{stats.MIN_REPS} quiet ones of the point, its reference or its baseline; all repetitions "
                    f"gave {status})"}
        q = {**q, "goal": {**q["goal"], "load": {**load, "busy_reps": busy, "reps": total, "threshold": THRESHOLD}}}
        out.append(q)
    return out


def not_judged(p: dict[str, Any]) -> bool:
    return ((p.get("goal") or {}).get("load") or {}).get("verdict", "").startswith(NOT_JUDGED)


def reapply(p: dict[str, Any], load: dict[str, Any] | None) -> None:
    """A point re-judged from its stored estimates (the report judges by today's rule) keeps what the load rule
    said when it ran: the load note, and "not judged" when the host was too busy to judge it."""
    if not load or p["goal"].get("status") == "reference":
        return
    if load.get("judged_on") is None:
        p["goal"] = {**p["goal"], "status": stats.INCONCLUSIVE, "all_reps_status": p["goal"]["status"]}
        p["meets_goal"] = False
    p["goal"] = {**p["goal"], "load": load}
