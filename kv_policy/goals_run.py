"""`kvds policy goals`: issue 14's goals on the five profiles, judged by the whole 95% interval; filed as a
`policy-goals` run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kv_policy import goals as g
from kv_policy.compare import Capacity, check_seeds, run_matrix, summarize
from kv_policy.compare_run import as_dicts
from kv_policy.profiles import get_profile
from kv_policy.tiers import Tier
from harness.results import ResultStore, Run
from harness.stats import Verdict


@dataclass(frozen=True)
class GoalsConfig:
    seeds: list[int]
    profiles: list[str]  # profile names (goals.PROFILES for all)
    fast: Tier
    slow: Tier
    cap: Capacity
    slow_bytes: int


@dataclass(frozen=True)
class GoalsSummary:
    """summary.json of a `policy-goals` run."""
    verdicts: list[dict[str, Any]]            # per goal: profile, policy, status, goal, value, lo, hi, conf (, reason)
    summary: dict[str, dict[str, Any]]        # per profile: compare's per-policy estimates over the seeds

    def as_dict(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "summary": self.summary}

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> "GoalsSummary":
        return cls(stored.get("verdicts", []), stored.get("summary", {}))


@dataclass
class GoalsOutcome:
    run: Run
    summary: GoalsSummary
    verdicts: list[tuple[g.Goal, Verdict]]
    per_profile: dict[str, dict[str, list[dict]]]  # profile -> policy -> per-seed metrics
    seeds: list[int]
    cap_label: str


def goals(cfg: GoalsConfig) -> GoalsOutcome:
    check_seeds(cfg.seeds)
    per_profile = {p: run_matrix(get_profile(p), cfg.seeds, list(g.POLICIES), cfg.cap, cfg.fast, cfg.slow,
                                 cfg.slow_bytes) for p in cfg.profiles}
    verdicts = [(goal, g.judge(goal, per_profile[goal.profile])) for goal in g.GOALS if goal.profile in per_profile]
    run = ResultStore().new_run("policy-goals", {"seeds": cfg.seeds, "profiles": cfg.profiles,
                                                 "capacity": cfg.cap.label(), "policies": list(g.POLICIES)})
    run.write_json("per_seed", per_profile)
    summary = GoalsSummary([{"profile": goal.profile, "policy": goal.policy, **v.as_dict()} for goal, v in verdicts],
                           {p: as_dicts(summarize(per)) for p, per in per_profile.items()})
    run.write_summary(summary.as_dict())
    return GoalsOutcome(run, summary, verdicts, per_profile, cfg.seeds, cfg.cap.label())
