"""A sweep's auto-grow (--until-width, --time-cap): which points get more repetitions after a round, and why
the sweep stops otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness import stats
from io_priority.clocks import finite
from io_priority.goal import GOAL_INTERFERENCE, goal_interference
from io_priority.variant_figures import estimate_of


@dataclass(frozen=True)
class Grow:
    """Auto-grow of a sweep (--until-width, --time-cap): after each round, every judged point whose goal
    interference is still inconclusive with an interval wider than `width` (hi / lo) gets `step` more repetitions,
    alternating (ABBA) with as many of its scheduler's unloaded reference (what its interference is measured
    against); other variants, decided or narrow, are not re-run. The sweep stops when no point is left or before a
    round that would end after `time_cap_s` seconds from the start. `step` is even, so the alternation stays
    balanced. Repetition length (--duration) stays fixed: pooling repetitions of different lengths would weigh
    them unequally. A point whose true interference sits on the limit stays wide-and-inconclusive only while its
    interval straddles the limit; growing it until the cap is what a sweep can do, not a promise of a verdict."""

    width: float
    time_cap_s: float
    step: int = 2

    def as_dict(self) -> dict[str, Any]:
        return {"width": self.width, "time_cap_s": self.time_cap_s, "step": self.step}


def interval_width(e: dict[str, Any] | None) -> float | None:
    """hi / lo of an interval (None without a positive interval)."""
    if not e or not (finite(e.get("lo")) and finite(e.get("hi"))) or e["lo"] <= 0:
        return None
    return e["hi"] / e["lo"]


def wide_points(pts: list[dict[str, Any]], width: float) -> dict[str, list[str]]:
    """Per scheduler, the judged points whose goal interference is inconclusive with an interval wider than
    `width` (or none at all)."""
    wide: dict[str, list[str]] = {}
    for p in pts:
        if p["variant"] == "baseline":
            continue
        e, label = goal_interference(p)
        v = stats.judge_at_most(estimate_of(e), GOAL_INTERFERENCE, label)
        w = interval_width(e)
        if v.status == stats.INCONCLUSIVE and (w is None or w > width):
            wide.setdefault(p["scheduler"], []).append(p["variant"])
    return wide


def grow_step(pts: list[dict[str, Any]], grow: Grow | None, elapsed_s: float,
              variant_reps_done: int) -> dict[str, Any]:
    """Which points get more repetitions after a round ("more": scheduler -> the variants to run again, the
    unloaded reference first), and why the sweep stops otherwise. The next round's time is estimated from the
    pace so far (seconds per variant-repetition) and must end within the cap."""
    if grow is None:
        return {"more": {}, "stop": "no auto-grow (--until-width not given)"}
    wide = wide_points(pts, grow.width)
    if not wide:
        return {"more": {}, "stop": f"every judged interval decided or narrower than {grow.width:g}x"}
    per_variant_rep = elapsed_s / max(1, variant_reps_done)
    cost = per_variant_rep * grow.step * sum(1 + len(vs) for vs in wide.values())
    if elapsed_s + cost > grow.time_cap_s:
        return {"more": {}, "stop": f"time cap {grow.time_cap_s:g} s (still wide: "
                                    + ", ".join(f"{s}/{v}" for s, vs in wide.items() for v in vs) + ")"}
    return {"more": {s: ["unloaded", *vs] for s, vs in wide.items()}, "step": grow.step, "stop": None,
            "wide": {s: vs for s, vs in wide.items()}}

