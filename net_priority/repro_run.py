"""`kvds net repro`: optionally run N default benches back to back (each files its own run), then re-judge the
given stored runs (default: the newest three net-bench runs) by today's rule, compare their verdicts variant by
variant and predict the chance that back-to-back runs agree (net_priority/repro.py). Files nothing itself."""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.errors import UserError
from harness.results import Filed, ResultStore
from net_priority import repro
from net_priority.summary import REPRO_SCHEMA, ReproSummary

KIND = "net-bench"


@dataclass(frozen=True)
class ReproConfig:
    runs: tuple[str, ...] = ()     # stored run ids (prefixes); empty: the newest `last` net-bench runs
    last: int = 3
    bench: int = 0                 # default benches to run first, back to back (their runs are then compared)
    reps: int | None = None        # repetitions of the predicted run (None: the compared runs' own)
    agree: int = 3                 # how many runs the prediction asks to agree


def _runs(cfg: ReproConfig, fresh: list[str]) -> list:
    store = ResultStore()
    if fresh:
        return [store.get(r) for r in fresh]
    if cfg.runs:
        runs = [store.get(r) for r in cfg.runs]
        wrong = [r.run_id for r in runs if r.meta.get("kind") != KIND]
        if wrong:
            raise UserError(f"not net-bench runs: {', '.join(wrong)}")
        return runs
    runs = [r for r in store.runs(KIND) if (r.path / "summary.json").exists()][-cfg.last:]
    if not runs:
        raise UserError("no stored net-bench runs to compare (run `kvds net bench`, or `kvds net repro --bench 3`)")
    return runs


def run(cfg: ReproConfig) -> Filed[ReproSummary]:
    t0 = time.monotonic()
    fresh: list[str] = []
    if cfg.bench:
        from net_priority import bench_run

        for _ in range(cfg.bench):
            fresh.append(bench_run.run(bench_run.BenchConfig()).run.run_id)
    runs = _runs(cfg, fresh)
    rows, pairs = repro.compare(runs)
    rate = runs[-1].summary["config"]["rate_mbit"]
    k = cfg.reps or int(runs[-1].summary["config"]["reps"])
    prediction = {name: repro.predict(p, rate, k, cfg.agree) for name, p in pairs.items()}
    same = [r["same"] for r in rows if r["same"] is not None]
    return Filed(None, ReproSummary(REPRO_SCHEMA, [r.run_id for r in runs], fresh, rows,
                                    bool(same) and all(same), prediction, round(time.monotonic() - t0, 1)))
