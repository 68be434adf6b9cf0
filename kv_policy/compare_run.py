"""`kvds policy compare`: every policy over several seeds of one workload, filed as a `policy-compare` run."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kv_policy.compare import Capacity, build, run_matrix, summarize, versus
from kv_policy.profiles import Profile
from kv_policy.source import trace_source
from kv_policy.tiers import Tier
from harness.results import ResultStore, Run
from harness.stats import Estimate

STORED_VERSUS = "_versus_lru"  # summary.json keeps the policies at the top level, the paired cuts under this key
RATE = {"unit": "tok/s"}       # goodput: the name's "_s" suffix is not seconds here


@dataclass(frozen=True)
class PolicyFigures:
    """One policy's figures over the seeds (summary.json `<policy>`, `--json` `policies.<policy>`; metrics.py defines
    each per-seed metric): each an estimate {value, lo, hi, conf, n, reason}, mean and 95% t interval over the seeds
    that have the metric (value None and a reason when none has). A run from before a metric existed reads it as {}."""
    dc_accesses: dict[str, Any]         # decode-critical reads per trace
    dc_misses: dict[str, Any]           # decode-critical reads that missed the fast tier, per trace
    dc_miss_ratio: dict[str, Any]       # decode-critical misses per decode-critical read
    hi_miss_ratio: dict[str, Any]       # the same for high-priority requests (priority >= 70)
    mid_miss_ratio: dict[str, Any]      # the same for priority 40-69
    low_miss_ratio: dict[str, Any]      # the same for priority < 40
    slo_attainment: dict[str, Any]      # share of request-steps whose step met the request's TPOT deadline
    slo_high: dict[str, Any]            # the same for high-priority requests
    slo_mid: dict[str, Any]             # the same for priority 40-69
    slo_low: dict[str, Any]             # the same for priority < 40
    goodput_tok_s: dict[str, Any] = field(metadata=RATE)  # tokens that met their deadline per second of step time
    step_p50_us: dict[str, Any]         # median decode-step latency (compute + KV stall, us)
    step_p99_us: dict[str, Any]         # its p99 (us; None where fewer than 10 steps lie beyond it)
    spills: dict[str, Any]              # blocks written to the slow tier per trace
    prefetches: dict[str, Any]          # background reads admitted within the I/O budget per trace
    prefetch_dropped: dict[str, Any]    # background reads the I/O budget turned away per trace
    prefetch_hit_ratio: dict[str, Any]  # share of prefetched blocks read before being evicted again
    recomputes: dict[str, Any]          # dropped blocks recomputed on their next read per trace
    noncritical_share: dict[str, Any]   # share of all reads no decode step waits on (prefill re-reads)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> "PolicyFigures":
        return cls(**{f.name: stored.get(f.name, {}) for f in fields(cls)})


@dataclass(frozen=True)
class VersusFigures:
    """One contender paired with LRU over the same seeds (summary.json `_versus_lru.<policy>`, `--json`
    `versus_lru.<policy>`): each an estimate {value, lo, hi, conf, n, reason}, 95% t interval over the seeds."""
    dc_miss_cut_vs_lru: dict[str, Any]         # 1 - its decode-critical misses / LRU's, per seed
    slo_high_minus_lru: dict[str, Any]         # its high-priority SLO attainment minus LRU's, per seed
    slo_minus_lru: dict[str, Any]              # its SLO attainment minus LRU's, per seed
    gap_to_min_closed: dict[str, Any] | None = None  # share of the LRU-to-MIN miss gap it closes (MIN simulated)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}  # no MIN row: the key is absent, as stored

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> "VersusFigures":
        return cls(**{f.name: stored.get(f.name, {} if f.default is not None else None) for f in fields(cls)})


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
    policies: dict[str, dict[str, Any]]    # per policy: its figures over the seeds, key by key in policy.compare.policies
    # (PolicyFigures)
    versus_lru: dict[str, dict[str, Any]]  # per contender: paired with LRU over the same seeds, key by key in
    # policy.compare.versus_lru (VersusFigures)

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
    """Per policy, its figures as PolicyFigures lays them out (a metric the dataclass does not name fails here)."""
    return {p: PolicyFigures(**{k: e.as_dict() for k, e in m.items()}).as_dict() for p, m in est.items()}


def versus_dicts(vs: dict[str, dict[str, Estimate]]) -> dict[str, dict[str, Any]]:
    return {p: VersusFigures(**{k: e.as_dict() for k, e in m.items()}).as_dict() for p, m in vs.items()}


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
    summary = CompareSummary(as_dicts(est), versus_dicts(vs))
    run.write_summary(summary.stored())
    return Comparison(run, summary, est, vs, source, seeds)
