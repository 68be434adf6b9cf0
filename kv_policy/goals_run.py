"""`kvds policy goals`: the track's goals on the five profiles (or on one trace file), judged by the whole 95%
interval; filed as a `policy-goals` run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import Filed, ResultStore, StoredSummary
from kv_policy import goals as g
from kv_policy.compare import Capacity, check_seeds, run_matrix, summarize, versus
from kv_policy.compare_run import as_dicts, versus_dicts
from kv_policy.importers import TraceOptions
from kv_policy.profiles import Profile, get_profile
from kv_policy.source import trace_source
from kv_policy.tiers import Tier


@dataclass(frozen=True)
class GoalsConfig:
    seeds: list[int]
    profiles: list[str]          # profile names (goals.PROFILES for all); ignored with a trace
    fast: Tier
    slow: Tier
    cap: Capacity
    slow_bytes: int
    trace: TraceOptions | None = None  # judge goals.TRACE_GOALS on this trace instead of the profiles
    trace_profile: Profile | None = None  # the classes a serving trace's priorities are drawn from
    tables: bool = False         # the text output also prints each profile's compare table


@dataclass(frozen=True)
class GoalsSummary(StoredSummary):
    """`kvds policy goals`'s result (summary.json and `--json`)."""
    verdicts: list[dict[str, Any]]            # per goal: profile, policy, what, status, goal, value, lo, hi, conf
    summary: dict[str, dict[str, Any]]        # per profile: compare's per-policy estimates over the seeds
    versus_lru: dict[str, dict[str, Any]]     # per profile: compare's contenders paired with LRU
    seeds: list[int]                          # the seeds (priority assignments on a trace) judged over
    capacity: str                             # the fast tier's size
    source: str                               # the profiles or the trace, in words
    priorities: str | None                    # who assigned priorities on a trace (rule, seeds); None: profiles
    tables: bool = False                      # whether the text output prints each profile's tables


def run(cfg: GoalsConfig) -> Filed[GoalsSummary]:
    goals_of = g.GOALS
    if cfg.trace is not None:
        src = trace_source(cfg.trace, cfg.trace_profile or get_profile("balanced"), cfg.seeds)
        check_seeds(src.seeds, point_ok=False)
        per_profile = {g.TRACE: run_matrix(cfg.trace_profile or get_profile("balanced"), src.seeds,
                                           list(g.POLICIES), cfg.cap, cfg.fast, cfg.slow, cfg.slow_bytes,
                                           src.trace_for_seed)}
        goals_of, source, priorities, trace_cfg = g.TRACE_GOALS, src.description, src.priorities, src.config
    else:
        check_seeds(cfg.seeds, point_ok=False)
        per_profile = {p: run_matrix(get_profile(p), cfg.seeds, list(g.POLICIES), cfg.cap, cfg.fast, cfg.slow,
                                     cfg.slow_bytes) for p in cfg.profiles}
        source, priorities, trace_cfg = f"profiles {', '.join(cfg.profiles)}", None, None
    verdicts = [(goal, g.judge(goal, per_profile[goal.profile])) for goal in goals_of
                if goal.profile in per_profile]
    filed = ResultStore().new_run("policy-goals", {"seeds": cfg.seeds, "profiles": list(per_profile),
                                                   "trace": trace_cfg, "capacity": cfg.cap.label(),
                                                   "policies": list(g.POLICIES)})
    filed.write_json("per_seed", per_profile)
    summary = GoalsSummary(
        [{"profile": goal.profile, "policy": goal.policy, "what": goal.what, **v.as_dict()} for goal, v in verdicts],
        {p: as_dicts(summarize(per)) for p, per in per_profile.items()},
        {p: versus_dicts(versus(per)) for p, per in per_profile.items()},
        cfg.seeds, cfg.cap.label(), source, priorities, cfg.tables)
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
