"""`kvds policy sweep`: one metric across fast-tier sizes, per policy, over seeds; filed as a `policy-sweep` run
with its figure."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.results import Filed, ResultStore, StoredSummary
from kv_policy.compare import Capacity, build, run_matrix, summarize
from kv_policy.compare_run import CompareConfig
from kv_policy.goals import versus_best_row
from kv_policy.source import trace_source


@dataclass(frozen=True)
class SweepConfig:
    workload: CompareConfig  # its capacity is replaced by each fraction
    fractions: list[float]   # fast-tier sizes as fractions of peak live KV bytes
    metric: str              # the metric tabulated (kv_policy.metrics.METRICS)


@dataclass(frozen=True)
class SweepSummary(StoredSummary):
    """`kvds policy sweep`'s result (summary.json and `--json`)."""
    metric: str                                   # the metric swept
    source: str                                   # what was simulated, in words
    priorities: str | None                        # who assigned priorities (rule, seeds); None: the profile
    seeds: list[int]                              # the seeds the intervals are over
    policies: list[str]                           # the rows, in order
    by_fraction: dict[str, dict[str, Any]]        # fraction (as text) -> policy -> estimate over seeds
    png: str                                      # the figure: the metric against fast-tier size
    versus_best_row: dict[str, list[dict[str, Any]]] | None = None  # fraction -> the contender's verdicts against
    # the best real-system row (goals.versus_best_row: what, status, goal, value, lo, hi, conf), when both ran

    OMIT_WHEN_NONE = ("versus_best_row",)


def run(cfg: SweepConfig) -> Filed[SweepSummary]:
    from kv_policy.metrics import METRICS
    from kv_policy.plots import sweep_png

    if cfg.metric not in METRICS:
        raise UserError(f"unknown metric {cfg.metric!r} (known: {', '.join(METRICS)})")
    w = cfg.workload
    for spec in w.policies:
        build(spec)
    if not cfg.fractions or any(f <= 0 for f in cfg.fractions):
        raise UserError("--fractions must be positive numbers")
    src = trace_source(w.trace, w.profile, w.seeds)
    per_fraction = {f: run_matrix(w.profile, src.seeds, w.policies, Capacity(fraction=f), w.fast, w.slow,
                                  w.slow_bytes, src.trace_for_seed, w.jobs) for f in cfg.fractions}
    est = {f: {p: m[cfg.metric] for p, m in summarize(per).items()} for f, per in per_fraction.items()}
    verdicts = {str(f): [v.as_dict() for v in versus_best_row(per)] for f, per in per_fraction.items()}
    filed = ResultStore().new_run("policy-sweep", {"profile": w.profile.as_dict(), "trace": src.config,
                                                   "seeds": src.seeds, "fractions": cfg.fractions,
                                                   "metric": cfg.metric, "policies": w.policies})
    by_fraction = {str(f): {p: est[f][p].as_dict() for p in w.policies} for f in cfg.fractions}
    filed.write_json("per_seed", {str(f): per for f, per in per_fraction.items()})
    summary = SweepSummary(cfg.metric, src.description, src.priorities, src.seeds, list(w.policies), by_fraction,
                           str(filed.path / "sweep.png"), verdicts if any(verdicts.values()) else None)
    filed.write_summary(summary.as_dict())  # before the figure: a plotting failure loses no figures
    title = f"{cfg.metric} vs fast-tier size: {src.description}"
    sweep_png(est, cfg.metric, title + (f"\n{src.priorities}" if src.priorities else ""), Path(summary.png))
    return Filed(filed, summary)
