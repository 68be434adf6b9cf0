"""`kvds policy sweep`: one metric across fast-tier sizes, per policy, over seeds; filed as a `policy-sweep` run
with its figure."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from kv_policy.compare import Capacity, build, run_matrix, summarize
from kv_policy.compare_run import CompareConfig
from kv_policy.source import trace_source
from harness.results import ResultStore, Run
from harness.stats import Estimate


@dataclass(frozen=True)
class SweepConfig:
    workload: CompareConfig  # its capacity is replaced by each fraction
    fractions: list[float]   # fast-tier sizes as fractions of peak live KV bytes
    metric: str              # the metric tabulated (kv_policy.metrics.METRICS)


@dataclass(frozen=True)
class SweepSummary:
    """`kvds policy sweep`'s result. summary.json stores `by_fraction` alone ({fraction: {policy: estimate}}, the
    layout every earlier run has); `from_json` reads it back."""
    metric: str                                   # the metric swept
    by_fraction: dict[str, dict[str, Any]]        # fraction (as text) -> policy -> estimate over seeds
    png: str                                      # the figure: the metric against fast-tier size

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "by_fraction": self.by_fraction, "png": self.png}

    def stored(self) -> dict[str, Any]:
        return self.by_fraction

    @classmethod
    def from_json(cls, stored: dict[str, Any], metric: str = "", png: str = "") -> "SweepSummary":
        return cls(metric, dict(stored), png)


@dataclass
class Sweep:
    run: Run
    summary: SweepSummary
    estimates: dict[float, dict[str, Estimate]]  # fraction -> policy -> the metric's estimate
    source: str
    seeds: list[int]


def sweep(cfg: SweepConfig) -> Sweep:
    from kv_policy.metrics import METRICS
    from kv_policy.plots import sweep_png

    if cfg.metric not in METRICS:
        raise UserError(f"unknown metric {cfg.metric!r} (known: {', '.join(METRICS)})")
    w = cfg.workload
    for spec in w.policies:
        build(spec)
    if not cfg.fractions or any(f <= 0 for f in cfg.fractions):
        raise UserError("--fractions must be positive numbers")
    trace_for_seed, seeds, source = trace_source(w.trace, w.profile, w.seeds, w.step_ms)
    est = {f: {p: m[cfg.metric] for p, m in summarize(run_matrix(w.profile, seeds, w.policies, Capacity(fraction=f),
                                                                 w.fast, w.slow, w.slow_bytes, trace_for_seed)).items()}
           for f in cfg.fractions}
    run = ResultStore().new_run("policy-sweep", {"profile": w.profile.as_dict(), "trace": w.trace, "seeds": seeds,
                                                 "fractions": cfg.fractions, "metric": cfg.metric,
                                                 "policies": w.policies})
    by_fraction = {str(f): {p: est[f][p].as_dict() for p in w.policies} for f in cfg.fractions}
    summary = SweepSummary(cfg.metric, by_fraction, str(run.path / "sweep.png"))
    run.write_summary(summary.stored())  # before the figure, as before: a plotting failure loses no figures
    sweep_png(est, cfg.metric, f"{cfg.metric} vs fast-tier size: {source}", Path(summary.png))
    return Sweep(run, summary, est, source, seeds)
