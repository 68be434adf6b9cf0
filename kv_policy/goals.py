"""Issue 14's goals as data, judged with the project's verdict rule (harness.stats: met only when the whole 95%
interval says so). Every figure is paired over seeds against LRU on the same traces."""
from __future__ import annotations

from dataclasses import dataclass

from kv_policy.compare import BASELINE, OPTIMUM
from kv_policy.metrics import gap_closed, paired
from harness.stats import Verdict, judge_at_least, judge_at_most, mean_ci

CONTENDER = "ExpectedNextUse"
# The priority knob is the operator's setting, chosen per workload (README "Measured", 2026-12-01 third round):
# 2.25 where the knob goal is judged (balanced, rag, speculative: chosen on seeds 50-65 and 600-639 with the batch
# raise; 1.5 / 1.75 / 2 / 2.5 measured) and on long_context_extreme; 1.5 on deadline_pressure, where half the
# requests are high priority and 2.25 costs more total misses than LRU's (high-priority SLO -0.011 [-0.031, 0.009]
# against +0.026 [0.018, 0.034] at 1.5, seeds 50-61).
WITH_KNOB = "ExpectedNextUse:priority_weight=2.25"
KNOB_DEADLINE = "ExpectedNextUse:priority_weight=1.5"
KNOB_BY_PROFILE = {"deadline_pressure": KNOB_DEADLINE}
PRIO_BOUND = "PrioMIN"
POLICIES = (BASELINE, "DeadlineAware", CONTENDER, WITH_KNOB, KNOB_DEADLINE, OPTIMUM, PRIO_BOUND)  # `--tables` rows
PROFILES = ("balanced", "deadline_pressure", "rag_mixed_priority", "speculative_decode", "long_context_extreme")


def knob(profile: str) -> str:
    """The knob setting the operator runs on `profile`."""
    return KNOB_BY_PROFILE.get(profile, WITH_KNOB)


@dataclass(frozen=True)
class Goal:
    """One judged figure: `what` of `policy` on `profile` compared with `limit` by `rule`."""

    profile: str
    policy: str
    what: str      # miss_cut | gap_closed | hi_miss | slo_high_gain
    rule: str      # at_least | at_most
    limit: float


GOALS: tuple[Goal, ...] = (
    *(Goal(p, CONTENDER, "miss_cut", "at_least", 0.20)
      for p in ("balanced", "deadline_pressure", "speculative_decode")),
    *(Goal(p, CONTENDER, "miss_cut", "at_least", 0.10) for p in ("rag_mixed_priority", "long_context_extreme")),
    *(Goal(p, CONTENDER, "gap_closed", "at_least", 0.40) for p in ("balanced", "deadline_pressure")),
    *(Goal(p, WITH_KNOB, "hi_miss", "at_most", 0.005)
      for p in ("balanced", "rag_mixed_priority", "speculative_decode")),
    *(Goal(p, WITH_KNOB, "miss_cut", "at_least", 0.10)
      for p in ("balanced", "rag_mixed_priority", "speculative_decode")),
    *(Goal(p, pol, "slo_high_gain", "at_least", 0.0) for p in PROFILES for pol in (CONTENDER, knob(p))),
    # Feasibility, not a contender's goal: PrioMIN has exactly the fewest high-priority misses any schedule
    # can have on a trace (offline.py), so where its interval lies above 0.005 no policy can meet the knob goal.
    *(Goal(p, PRIO_BOUND, "hi_miss", "at_most", 0.005)
      for p in ("balanced", "rag_mixed_priority", "speculative_decode")),
)


def needs(goal: Goal) -> tuple[str, ...]:
    """The policies whose per-seed figures `judge` reads for this goal."""
    return (goal.policy, BASELINE, OPTIMUM) if goal.what == "gap_closed" else (goal.policy, BASELINE)


def judge(goal: Goal, per_policy: dict[str, list[dict]]) -> Verdict:
    """The goal's verdict from per-seed metrics of one profile."""
    runs, lru = per_policy[goal.policy], per_policy[BASELINE]
    if goal.what == "miss_cut":
        est, label = paired(runs, lru, "dc_miss_ratio"), "dc miss cut vs LRU "
    elif goal.what == "gap_closed":
        est, label = gap_closed(runs, lru, per_policy[OPTIMUM]), "LRU-to-MIN gap closed "
    elif goal.what == "hi_miss":
        # a miss ratio cannot go below 0: the t interval is clipped there (harness.stats.mean_ci's floor)
        est = mean_ci([r["hi_miss_ratio"] for r in runs if r["hi_miss_ratio"] is not None], floor=0.0)
        label = "hi miss "
    else:
        est, label = paired(runs, lru, "slo_high", "difference"), "hi SLO attainment minus LRU's "
    return (judge_at_least if goal.rule == "at_least" else judge_at_most)(est, goal.limit, label)
