"""The I/O renderers take the typed summaries a verb's run returns (harness/verbs.py) and print their numbers
through harness/report/fmt: built here from synthetic repetitions through the same summarising code a run uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import stats
from harness.mapping import load_mapping
from io_priority import render
from io_priority.goal import goal_summary
from io_priority.summary import (BENCH_SCHEMA, FIO_CHECK_SCHEMA, SWEEP_SCHEMA, BenchSummary, FioCheckSummary,
                                 SweepSummary)
from io_priority.sweep_points import points
from io_priority.variant_figures import summarize
from io_priority.variant_runs import Variant
from io_priority.workload import RepResult

MS = 1_000_000
CONFIG = {"engine": "psync", "device": {"path": "/dev/loop9"}, "scheduler": "mq-deadline", "reps": 3,
          "workload": {"duration_s": 1.0, "read_bs": 16384}}


def _reps(factor: float, seed: int) -> list[RepResult]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        svc = (rng.lognormal(math.log(200e3), 0.3, 1200) * factor).astype(np.int64)
        due = np.arange(svc.size, dtype=np.int64) * 5 * MS
        clk = np.stack([due, due, due + svc], axis=1)
        out.append(RepResult(clk[:, 2] - clk[:, 0], {"reads": svc.size, "errors": 0, "late": 0}, None, None,
                             clocks=clk))
    return out


@pytest.fixture(scope="module")
def modes() -> dict:
    variants = [Variant("unloaded", None), Variant("separated", load_mapping("ioprio-only"))]
    results = {"unloaded": _reps(1.0, 1), "separated": _reps(1.3, 2)}
    order = stats.alternating_order(["unloaded", "separated"], 3)
    return summarize(variants, results, "psync", n_boot=100, order=order)


def test_bench_renders_its_typed_summary(modes: dict, capsys: pytest.CaptureFixture[str]) -> None:
    s = BenchSummary.from_json(BenchSummary(BENCH_SCHEMA, CONFIG, [[0, "unloaded"]], modes, None, "note").as_dict())
    render.bench(s)
    out = capsys.readouterr().out
    assert "kvds io bench: psync on /dev/loop9" in out and "separated" in out and "nan" not in out.lower()


def test_sweep_renders_its_typed_summary(modes: dict, capsys: pytest.CaptureFixture[str]) -> None:
    per = {"mq-deadline": {"modes": modes, "rep_order": [], "reps": 3}}
    pts = points(per)
    s = SweepSummary.from_json(SweepSummary(SWEEP_SCHEMA, CONFIG, per, pts, goal_summary(pts, per), None,
                                            "note").as_dict())
    render.sweep(s)
    out = capsys.readouterr().out
    assert "mq-deadline/separated" in out and "goal (interference <= 1.5" in out and "pareto.png" in out


def test_fio_check_renders_one_rep_as_a_point_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    lat = {"p50": {"value": 80.0, "lo": None, "hi": None}, "p99": {"value": 120.0, "lo": 110.0, "hi": 130.0},
           "p99.9": {"value": None, "reason": "n too small: 400 samples, p99.9 needs >= 10000"}}
    tool = {"reads": 400, "latency_us": lat, "per_rep_p50_us": [80.0]}
    verdict = stats.judge_at_most(stats.Estimate(1.0, math.nan, math.nan), 1.1, "p50 ").as_dict()
    s = FioCheckSummary(FIO_CHECK_SCHEMA, CONFIG, [[0, "kvds"]], {"kvds": tool, "fio": tool}, [],
                        {"value": 1.0, "lo": None, "hi": None}, {"value": 1.5, "lo": 1.2, "hi": 1.9}, 1.1,
                        "unloaded-qd1", "sleep", "submission -> completion", "fio ...", verdict, "", False, {})
    render.fio_check(s)
    out = capsys.readouterr().out
    assert "p50 80 (point estimate)" in out and "p99 120 [110, 130]" in out
    assert "p99.9 - (n too small: 400 < 10000)" in out and "p50 kvds/fio = 1 (point estimate)" in out
