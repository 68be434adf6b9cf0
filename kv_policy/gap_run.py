"""`kvds policy gap`: where an online policy's decode-critical misses exceed MIN's, by what an engine knows at each
read (kv_policy/gap.py), over several seeds (priority assignments) of one trace; filed as a `policy-gap` run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import Filed, ResultStore, StoredSummary
from harness.stats import mean_ci
from kv_policy import gap
from kv_policy.compare import Capacity, build
from kv_policy.generator import generate
from kv_policy.importers import TraceOptions
from kv_policy.offline import MIN, RateOracle
from kv_policy.profiles import Profile
from kv_policy.source import trace_source
from kv_policy.tiers import Tier, for_trace
from harness.progress import progress


@dataclass(frozen=True)
class GapConfig:
    """The trace, its priority assignments, the tiers, and the two online rows to set against MIN."""
    profile: Profile
    seeds: list[int]
    policy: str          # the online policy whose excess over MIN is located
    reference: str       # a second online row (the best real-system row), counted beside it
    fast: Tier
    slow: Tier
    cap: Capacity
    slow_bytes: int
    trace: TraceOptions | None = None


@dataclass(frozen=True)
class GapSummary(StoredSummary):
    """`kvds policy gap`'s result (summary.json and `--json`)."""
    source: str                          # what was simulated, in words
    priorities: str | None               # who assigned priorities (rule, seeds); None: the profile
    seeds: list[int]                     # the seeds the intervals are over
    capacity: str                        # the fast tier's size
    policy: str                          # the online policy
    reference: str                       # the second online row
    dc_reads: int                        # decode-critical reads, summed over the seeds
    dc_misses: dict[str, dict[str, Any]]  # per row (policy, reference, RateOracle on a generated trace, MIN):
    # decode-critical misses per seed, estimate
    classes: dict[str, dict[str, dict[str, int]]]  # feature -> class -> {reads, <row>: misses}, summed over seeds
    excess_share: dict[str, dict[str, dict[str, Any]]]  # feature -> class -> share of (policy - MIN) misses there,
    # estimate over the seeds (a class where MIN misses more than the policy has a negative share)
    first_hh_prefix_share: dict[str, Any]  # share of the excess on first heavy-hitter reads of prefix blocks


def run(cfg: GapConfig) -> Filed[GapSummary]:
    build(cfg.policy)
    build(cfg.reference)
    src = trace_source(cfg.trace, cfg.profile, cfg.seeds)
    rows: tuple[str, ...] = (cfg.policy, cfg.reference, MIN.name)
    per_seed: list[gap.SeedCounts] = []
    with progress("gap: simulating", total=len(src.seeds) * (len(rows) + 1)) as bar:
        for seed in src.seeds:
            trace = src.trace_for_seed(seed) if src.trace_for_seed else generate(cfg.profile, seed)
            if trace.block_hh_rate is not None:  # a generated trace: the rate oracle between online and MIN
                rows = (cfg.policy, cfg.reference, RateOracle.name, MIN.name)
            tiers = for_trace(trace, cfg.fast, cfg.slow, cfg.cap.for_trace(trace), cfg.slow_bytes)
            masks = {}
            for spec in rows:
                masks[spec] = gap.dc_miss_mask(trace, build(spec), tiers)
                bar.advance(1)
            per_seed.append(gap.count(gap.classify(trace, cfg.profile.block_tokens), masks))
    summary = summarize(cfg, src.description, src.priorities, src.seeds, rows, per_seed)
    config = {"profile": cfg.profile.as_dict(), "trace": src.config, "seeds": src.seeds, "policy": cfg.policy,
              "reference": cfg.reference, "capacity": cfg.cap.label(), "fast": cfg.fast.__dict__,
              "slow": cfg.slow.__dict__}
    filed = ResultStore().new_run("policy-gap", config)
    filed.write_json("per_seed", [c.__dict__ for c in per_seed])
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)


def summarize(cfg: GapConfig, source: str, priorities: str | None, seeds: list[int], rows: tuple[str, ...],
              per_seed: list[gap.SeedCounts]) -> GapSummary:
    policy, opt = rows[0], rows[-1]
    excess = [c.totals[policy] - c.totals[opt] for c in per_seed]
    classes: dict[str, dict[str, dict[str, int]]] = {}
    shares: dict[str, dict[str, dict[str, Any]]] = {}
    for name, labels in gap.FEATURES.items():
        classes[name], shares[name] = {}, {}
        for v, label in enumerate(labels):
            reads = sum(c.reads[name][v] for c in per_seed)
            if not reads:
                continue
            classes[name][label] = {"reads": reads, **{r: sum(c.misses[r][name][v] for c in per_seed) for r in rows}}
            vals = [(c.misses[policy][name][v] - c.misses[opt][name][v]) / e for c, e in zip(per_seed, excess) if e]
            shares[name][label] = mean_ci(vals).as_dict()
    head = [(c.headline[policy] - c.headline[opt]) / e for c, e in zip(per_seed, excess) if e]
    return GapSummary(source, priorities, seeds, cfg.cap.label(), policy, cfg.reference,
                      sum(c.n_reads for c in per_seed),
                      {r: mean_ci([c.totals[r] for c in per_seed]).as_dict() for r in rows},
                      classes, shares, mean_ci(head).as_dict())
