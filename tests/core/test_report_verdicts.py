"""The report: verdicts that agree with their summary line, intervals over repetitions, missing data as "-"."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.report import plots
from harness.report.build import build_report, verdict_lines
from harness.report.context import load_suites
from harness.results import ResultStore
from harness.stats import rep_ratio


def _e(v: float | None, lo: float | None = None, hi: float | None = None, reason: str = "") -> dict:
    d = {"value": v, "lo": lo, "hi": hi, "conf": 0.95}
    if reason:
        d["reason"] = reason
    return d


def _sweep_summary() -> dict:
    unloaded = {"mapping": None, "latency_us": {"p50": _e(50), "p99": _e(100, 90, 110)}, "interference_factor": None,
                "spill_mb_s": None, "spill_retained": None, "per_rep_p99_us": [100.0, 105.0, 98.0]}
    # recorded under the old point-estimate rule: "meets_goal" True although the interval reaches 4.8x
    wide = {"scheduler": "mq-deadline", "variant": "wide", "mapping": "wide", "p99_us": _e(73, 20, 480),
            "p50_us": _e(40), "interference_factor": _e(0.73, 0.2, 4.8), "spill_mb_s": _e(300, 250, 350),
            "spill_retained": 0.75, "spill_retained_est": _e(0.75, 0.6, 0.9), "pareto": True, "meets_goal": True}
    tight = {**wide, "variant": "tight", "mapping": "tight", "interference_factor": _e(1.1, 1.0, 1.2),
             "p99_us": _e(110, 100, 120)}
    base = {**wide, "variant": "baseline", "mapping": "none", "interference_factor": _e(1.0, 0.9, 1.1),
            "spill_retained": 1.0, "spill_retained_est": _e(1.0, 1.0, 1.0), "meets_goal": True}
    return {"schema": "kvds.io-sweep/1", "config": {}, "points": [base, wide, tight],
            "schedulers": {"mq-deadline": {"modes": {"unloaded": unloaded}}},
            "goal": {"met_by": ["mq-deadline/baseline", "mq-deadline/wide", "mq-deadline/tight"]}}


def test_sweep_rows_and_goal_line_never_contradict(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    run = store.new_run("io-sweep", {})
    run.write_summary(_sweep_summary())
    paths = build_report(load_suites([run.run_id], store), tmp_path / "out")
    md = paths["markdown"].read_text()
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in md.splitlines()
            if line.startswith("| mq-deadline |")}
    assert rows == {"baseline": "reference", "wide": "inconclusive", "tight": "met"}
    line = next(line for line in md.splitlines() if line.startswith("goal (interference"))
    assert "met by mq-deadline/tight;" in line and "inconclusive: mq-deadline/wide" in line
    assert "baseline" not in line
    met_rows = {v for v, status in rows.items() if status == "met"}
    met_line = set(line.split("met by ")[1].split(";")[0].replace("mq-deadline/", "").split(", "))
    assert met_rows == met_line
    assert any("io sweep" in v for v in verdict_lines(paths["json"]))


def _bench_run(store: ResultStore, reps: int, scale: float, seed: int) -> str:
    rng = np.random.default_rng(seed)
    run = store.new_run("io-bench", {})
    groups = [rng.lognormal(np.log(100e3), 0.5, 2000) * rng.uniform(0.8, 1.2) * scale for _ in range(reps)]
    for k, g in enumerate(groups):
        run.write_samples(f"unloaded-rep{k}", g.astype(np.int64))
    run.write_samples("unloaded", np.concatenate(groups).astype(np.int64))
    run.write_summary({"config": {"reps": reps}, "modes": {"unloaded": {
        "reads": int(sum(g.size for g in groups)), "latency_us": {"p50": _e(100), "p90": _e(150), "p99": _e(300),
                                                                  "p99.9": _e(None, reason="n too small: 6000 samples, p99.9 needs >= 10000")},
        "max_us": math.nan, "interference_factor": None, "spill_mb_s": None, "block_layer": None}}})
    return run.run_id, groups


def _suite(store: ResultStore, member: str) -> str:
    suite = store.new_run("suite", {})
    suite.write_json("stages", {"stages": [{"name": "io", "status": "ok", "seconds": 1.0, "runs": [member]}]})
    return suite.run_id


def test_cross_suite_ratio_resamples_repetitions(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    a, ga = _bench_run(store, 3, 1.0, 1)
    b, gb = _bench_run(store, 3, 1.3, 2)
    c, _ = _bench_run(store, 2, 1.3, 3)
    a, b, c = _suite(store, a), _suite(store, b), _suite(store, c)
    md = build_report(load_suites([a, b], store), tmp_path / "ab")["markdown"].read_text()
    want = rep_ratio([g.astype(np.int64).astype(float) for g in gb], [g.astype(np.int64).astype(float) for g in ga],
                     99.0, n_boot=400)
    row = next(line for line in md.splitlines() if line.startswith("| unloaded |") and " / " in line)
    assert f"[{want.lo:.3g}, {want.hi:.3g}]" in row and "| 3 / 3 |" in row
    assert "- (n too small: 6000 samples, p99.9 needs >= 10000)" in md  # p99.9 is not printed, and says why
    assert "nan" not in md.lower().replace("nanos", "")
    md2 = build_report(load_suites([a, c], store), tmp_path / "ac")["markdown"].read_text()
    row2 = next(line for line in md2.splitlines() if line.startswith("| unloaded |") and " / " in line)
    assert "(point estimate)" in row2 and "[" not in row2.split("|")[3]


def test_qemu_without_a_ktap_plan_is_not_zero_of_zero(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    run = store.new_run("qemu-validate", {})
    run.write_summary({"ok": False, "kernel": {"label": "k"}, "tests": {"planned": None, "passed": 0},
                       "boot": {}, "failure": "guest did not boot"})
    md = build_report(load_suites([run.run_id], store), tmp_path / "q")["markdown"].read_text()
    assert "0/0" not in md and "- (no KTAP plan reported: guest did not boot)" in md


def test_no_zero_height_bar_for_missing_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = {}

    def keep(fig, path):  # noqa: ANN001
        drawn["ax"] = fig.axes[0]
        return path

    monkeypatch.setattr(plots, "_save", keep)
    plots.grouped_bars(["a", "b", "c"], {"x": [1.0, math.nan, 3.0], "y": [2.0, 2.5, math.nan]},
                         tmp_path / "f.png", "t", "y", errors={"x": ([0.5, math.nan, 2.0], [1.5, math.nan, 4.0])})
    ax = drawn["ax"]
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [1.0, 2.0, 2.5, 3.0]  # four bars for four numbers: none at zero for the two NaNs
    assert sum(t.get_text() == "n/a" for t in ax.texts) == 2
