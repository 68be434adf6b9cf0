"""`kvds policy compare`: every policy over several seeds of one workload, filed as a `policy-compare` run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import Filed, ResultStore, StoredSummary
from harness.stats import Estimate
from kv_policy.compare import Capacity, build, run_matrix, summarize, versus
from kv_policy.profiles import Profile
from kv_policy.source import TraceOptions, trace_source
from kv_policy.tiers import Tier

RATE = {"unit": "tok/s"}       # goodput: the name's "_s" suffix is not seconds here


@dataclass(frozen=True)
class PolicyFigures(StoredSummary):
    """One policy's figures over the seeds (`policies.<policy>`; metrics.py defines each per-seed metric): each an
    estimate {value, lo, hi, conf, n, reason}, mean and 95% t interval over the seeds that have the metric (value
    None and a reason when none has)."""
    STRICT = False  # nested: converted with the summary that holds it
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
    prefill_reload_tokens: dict[str, Any]  # prefill tokens whose KV was reloaded or recomputed, per request


@dataclass(frozen=True)
class VersusFigures(StoredSummary):
    """One contender paired with LRU over the same seeds (`versus_lru.<policy>`): each an estimate {value, lo, hi,
    conf, n, reason}, 95% t interval over the seeds."""
    STRICT = False
    OMIT_WHEN_NONE = ("gap_to_min_closed",)
    dc_miss_cut_vs_lru: dict[str, Any]         # 1 - its decode-critical misses / LRU's, per seed
    slo_high_minus_lru: dict[str, Any]         # its high-priority SLO attainment minus LRU's, per seed
    slo_minus_lru: dict[str, Any]              # its SLO attainment minus LRU's, per seed
    gap_to_min_closed: dict[str, Any] | None = None  # share of the LRU-to-MIN miss gap it closes (MIN simulated)


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
    trace: TraceOptions | None = None   # a trace file instead of the generated profile
    jobs: int = 0                       # worker processes per seed (0: one per available CPU on a long trace)


@dataclass(frozen=True)
class CompareSummary(StoredSummary):
    """`kvds policy compare`'s result (summary.json and `--json`)."""
    source: str                            # what was simulated, in words
    priorities: str | None                 # who assigned priorities and deadlines (rule, seeds); None: the profile
    seeds: list[int]                       # the seeds (or priority assignments) the intervals are over
    capacity: str                          # the fast tier's size
    policies: dict[str, dict[str, Any]]    # per policy: its figures over the seeds, key by key in
    # policy.compare.policies (PolicyFigures)
    versus_lru: dict[str, dict[str, Any]]  # per contender: paired with LRU over the same seeds, key by key in
    # policy.compare.versus_lru (VersusFigures)


def as_dicts(est: dict[str, dict[str, Estimate]]) -> dict[str, dict[str, Any]]:
    """Per policy, its figures as PolicyFigures lays them out (a metric the dataclass does not name fails here)."""
    return {p: PolicyFigures(**{k: e.as_dict() for k, e in m.items()}).as_dict() for p, m in est.items()}


def versus_dicts(vs: dict[str, dict[str, Estimate]]) -> dict[str, dict[str, Any]]:
    return {p: VersusFigures(**{k: e.as_dict() for k, e in m.items()}).as_dict() for p, m in vs.items()}


def run(cfg: CompareConfig) -> Filed[CompareSummary]:
    for spec in cfg.policies:
        build(spec)
    src = trace_source(cfg.trace, cfg.profile, cfg.seeds)
    per_policy = run_matrix(cfg.profile, src.seeds, cfg.policies, cfg.cap, cfg.fast, cfg.slow, cfg.slow_bytes,
                            src.trace_for_seed, cfg.jobs)
    config = {"profile": cfg.profile.as_dict(), "trace": src.config, "seeds": src.seeds, "policies": cfg.policies,
              "capacity": cfg.cap.label(), "fast": cfg.fast.__dict__, "slow": cfg.slow.__dict__}
    filed = ResultStore().new_run("policy-compare", config)
    filed.write_json("per_seed", per_policy)
    summary = CompareSummary(src.description, src.priorities, src.seeds, cfg.cap.label(),
                             as_dicts(summarize(per_policy)), versus_dicts(versus(per_policy)))
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
