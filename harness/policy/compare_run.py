"""`kvds policy compare`: every policy over several seeds of one workload, filed as a `policy-compare` run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.policy.compare import Capacity, build, run_matrix, summarize, versus
from harness.policy.profiles import Profile
from harness.policy.source import trace_source
from harness.policy.tiers import Tier
from harness.results import ResultStore, Run
from harness.stats import Estimate

STORED_VERSUS = "_versus_lru"  # summary.json keeps the policies at the top level, the paired cuts under this key


@dataclass(frozen=True)
class CompareConfig:
    """What a simulation runs on: the profile (or a trace file batched like it), its seeds, the tiers."""
    profile: Profile
    seeds: list[int]
    policies: list[str]
    fast: Tier
    slow: Tier
    cap: Capacity
    slow_bytes: int
    trace: str | None = None   # a trace file instead of the generated profile
    step_ms: float = 20.0      # decode step length when the trace file is a request trace


@dataclass(frozen=True)
class CompareSummary:
    """`kvds policy compare`'s result. summary.json stores it as {policy: metrics, ..., "_versus_lru": ...}
    (`stored()`, the layout every earlier run has); `from_json` reads that layout back."""
    policies: dict[str, dict[str, Any]]    # per policy: metric -> estimate over seeds (value, lo, hi, n)
    versus_lru: dict[str, dict[str, Any]]  # per contender: paired cuts against LRU over the same seeds

    def as_dict(self) -> dict[str, Any]:
        return {"policies": self.policies, "versus_lru": self.versus_lru}

    def stored(self) -> dict[str, Any]:
        return {**self.policies, STORED_VERSUS: self.versus_lru}

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> "CompareSummary":
        return cls({p: m for p, m in stored.items() if not p.startswith("_")}, stored.get(STORED_VERSUS, {}))


@dataclass
class Comparison:
    run: Run
    summary: CompareSummary
    estimates: dict[str, dict[str, Estimate]]  # the same figures as Estimates, for the text tables
    versus: dict[str, dict[str, Estimate]]
    source: str                                # what was simulated, in words
    seeds: list[int] = field(default_factory=list)


def as_dicts(est: dict[str, dict[str, Estimate]]) -> dict[str, dict[str, Any]]:
    return {p: {k: e.as_dict() for k, e in m.items()} for p, m in est.items()}


def compare(w: CompareConfig) -> Comparison:
    for spec in w.policies:
        build(spec)
    trace_for_seed, seeds, source = trace_source(w.trace, w.profile, w.seeds, w.step_ms)
    per_policy = run_matrix(w.profile, seeds, w.policies, w.cap, w.fast, w.slow, w.slow_bytes, trace_for_seed)
    est, vs = summarize(per_policy), versus(per_policy)
    config = {"profile": w.profile.as_dict(), "trace": w.trace, "seeds": seeds, "policies": w.policies,
              "capacity": w.cap.label(), "fast": w.fast.__dict__, "slow": w.slow.__dict__}
    run = ResultStore().new_run("policy-compare", config)
    run.write_json("per_seed", per_policy)
    summary = CompareSummary(as_dicts(est), as_dicts(vs))
    run.write_summary(summary.stored())
    return Comparison(run, summary, est, vs, source, seeds)
