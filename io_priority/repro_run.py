"""`kvds io repro`: does a sweep's verdict repeat? Stored sweeps compared point by point under a rule, and how
often sweeps of a given size would agree (io_priority/repro.py holds the comparison and the prediction model).
Files no run: it reads stored ones."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import UserError
from harness.results import Filed, ResultStore, Run
from io_priority.auto_grow import Grow
from io_priority.repro import Judged, compare, fit, loaded_points, predict, rejudge
from io_priority.summary import REPRO_SCHEMA, ReproSummary
from io_priority.sweep_run import DEFAULT_PLAN


@dataclass(frozen=True)
class ReproConfig:
    runs: tuple[str, ...]                 # io-sweep run ids, prefixes or paths, in the order run
    rule: str = "stored"                  # stored, paired or unpaired (io_priority/repro.py)
    predict: tuple[int, ...] = ()         # repetition counts to simulate (none: compare only)
    default_plan: bool = False            # predict for DEFAULT_PLAN's points instead of the runs'
    sims: int = 1000
    grow: Grow | None = None


def run(cfg: ReproConfig) -> Filed[ReproSummary]:
    """The stored sweeps compared under cfg.rule, and the prediction (paired unless the rule is unpaired)."""
    store = ResultStore()
    runs_ = [store.get(ref) for ref in cfg.runs]
    judged: list[Run | Judged] = (list(runs_) if cfg.rule == "stored"
                                  else [rejudge(r, cfg.rule == "paired") for r in runs_])
    cmp = compare(judged)
    if not cfg.predict:
        return Filed(None, ReproSummary(REPRO_SCHEMA, cfg.rule, cmp))
    model = fit(runs_)
    pts = ([(s, m) for s, ms in DEFAULT_PLAN.items() for m in ms] if cfg.default_plan
           else loaded_points(runs_))
    missing = [f"{s}/{v}" for s, v in pts if not (model.get(s, {}).get(v) or {}).get("p99")]
    if missing:
        raise UserError(f"no repetitions of {', '.join(missing)} in the given runs to predict from")
    paired = cfg.rule != "unpaired"
    unpaired_pts = [f"{s}/{v}" for s, v in pts if paired and not model[s][v].get("given")]
    if unpaired_pts:
        raise UserError(f"fewer than 3 side-by-side pairs of {', '.join(unpaired_pts)} with the unloaded "
                        "reference in the given runs: --rule unpaired predicts without pairs")
    pred = predict(model, pts, cfg.predict, sims=cfg.sims, grow=cfg.grow, paired=paired)
    return Filed(None, ReproSummary(REPRO_SCHEMA, cfg.rule, cmp, {str(k): v for k, v in pred.items()},
                                    "paired" if paired else "unpaired"))
