"""`kvds io repro`: stored sweeps compared point by point, and the prediction of how often sweeps of a size agree
(constructed runs and models: the rule under test is the comparison and the simulation, not a device)."""

from __future__ import annotations

import json
import math

from harness import stats
from harness.results import ResultStore
from io_priority import render, repro
from io_priority.auto_grow import Grow
from io_priority.summary import SWEEP_SCHEMA
from io_priority.repro import LogNormal
from tests.conftest import run_kvds


def _e(v: float, lo: float, hi: float) -> dict:
    return {"value": v, "lo": lo, "hi": hi, "conf": 0.95}


def _sweep_run(store: ResultStore, statuses: dict[str, str]) -> str:
    pts = [{"scheduler": "mq-deadline", "variant": "baseline", "goal": {"status": "reference"},
            "interference_service": _e(14.0, 10.0, 20.0), "spill_retained_est": _e(1.0, 0.9, 1.1), "stalls": 0}]
    for v, st in statuses.items():
        pts.append({"scheduler": "mq-deadline", "variant": v, "goal": {"status": st}, "stalls": 1,
                    "interference_service": _e(0.7, 0.5, 0.9), "spill_retained_est": _e(0.8, 0.6, 1.0),
                    "reps": 8})
    modes = {"unloaded": {"per_rep_service_p99_us": [300.0, 320.0, 310.0], "spill_mb_s_per_rep": None},
             "baseline": {"per_rep_service_p99_us": [5000.0, 6000.0, 5500.0],
                          "spill_mb_s_per_rep": [3000.0, 3100.0, 2900.0]}}
    for v in statuses:
        modes[v] = {"per_rep_service_p99_us": [200.0, 220.0, 210.0], "spill_mb_s_per_rep": [2400.0, 2500.0, 2300.0]}
    run = store.new_run("io-sweep", {"rounds": [{"elapsed_s": 123.0}]})
    run.write_summary({"schema": SWEEP_SCHEMA, "config": {"rounds": [{"elapsed_s": 123.0}]},
                       "points": pts, "schedulers": {"mq-deadline": {
                           "modes": modes,
                           "rep_order": [list(x) for x in stats.alternating_order(list(modes), 3)]}}})
    return run.run_id


def test_compare_says_which_points_repeated(tmp_path) -> None:
    store = ResultStore(tmp_path)
    ids = [_sweep_run(store, {"a": "met", "b": "inconclusive"}), _sweep_run(store, {"a": "met", "b": "met"}),
           _sweep_run(store, {"a": "met"})]
    cmp = repro.compare([store.get(i) for i in ids])
    rows = {r["point"]: r for r in cmp["rows"]}
    assert rows["mq-deadline/a"]["same"] and rows["mq-deadline/a"]["statuses"] == ["met"] * 3
    assert not rows["mq-deadline/b"]["same"]  # changed, and absent from the third sweep
    assert rows["mq-deadline/b"]["statuses"] == ["inconclusive", "met", "-"]
    assert rows["mq-deadline/baseline"]["same"] and cmp["judged"] == 2 and cmp["repeated"] == 1
    assert rows["mq-deadline/a"]["cells"][0]["text"] == "0.70 [0.50, 0.90] / 0.80 [0.60, 1.00] / 1 / 8"
    lines: list[str] = []
    render.print_compare(cmp, echo=lines.append)
    assert any(line.startswith("| mq-deadline/b |") and line.endswith("| NO |") for line in lines)
    assert lines[-1] == "verdicts repeated: 1 of 2 judged points"


def _model(kept_mu: float, kept_sigma: float) -> dict:
    return {"s": {"unloaded": {"p99": LogNormal(math.log(300), 0.1, 9), "mbs": None},
                  "baseline": {"p99": LogNormal(math.log(5000), 0.2, 9), "mbs": LogNormal(math.log(3000), 0.05, 9)},
                  "p": {"p99": LogNormal(math.log(200), 0.1, 9), "mbs": LogNormal(kept_mu + math.log(3000),
                                                                                   kept_sigma, 9)}}}


def test_a_point_far_from_its_limits_repeats_and_one_on_a_limit_does_not() -> None:
    far = repro.predict(_model(math.log(0.8), 0.05), [("s", "p")], [6], sims=100)[6]["points"]["s/p"]
    assert far["met"] == 1.0 and far["same"] == 1.0
    # spill kept exactly at the 50% limit: its 95% interval covers the limit about 95% of the time at any size,
    # so "inconclusive" is what repeats
    on = repro.predict(_model(math.log(0.5), 0.15), [("s", "p")], [3, 12], sims=100)
    assert all(on[k]["points"]["s/p"]["inconclusive"] > 0.85 for k in (3, 12))
    # a little off the limit (45% kept): the flips; a narrower interval (more repetitions) lands it on "missed"
    # as often as not, so three sweeps agree less often at 12 repetitions than at 3
    near = repro.predict(_model(math.log(0.45), 0.15), [("s", "p")], [3, 12], sims=100)
    p3, p12 = near[3]["points"]["s/p"], near[12]["points"]["s/p"]
    assert p12["missed"] > p3["missed"] and p12["same"] < p3["same"] and p12["met"] == 0.0
    assert 0.2 < p12["missed"] < 0.8


def test_growth_adds_repetitions_only_to_a_wide_point() -> None:
    import numpy as np

    model = _model(math.log(0.8), 0.05)
    model["s"]["p"]["p99"] = LogNormal(math.log(420), 0.4, 9)  # 1.4x the reference, repetitions 0.4 apart: wide
    rng = np.random.default_rng(1)
    fixed = repro.simulate_sweep(model, [("s", "p")], 3, rng, None, s_per_rep=1.0)
    grown = repro.simulate_sweep(model, [("s", "p")], 3, rng, Grow(2.0, 60.0), s_per_rep=1.0)
    assert fixed["seconds"] == 9.0  # 3 x (unloaded, baseline, p)
    assert 9.0 < grown["seconds"] <= 60.0 and (grown["seconds"] - 9.0) % 4 == 0  # rounds of 2 x (unloaded, p)


def test_cli_repro_compares_and_refuses_bad_input(tmp_path, kvds_env: dict[str, str]) -> None:
    store = ResultStore(tmp_path / "results")
    ids = [_sweep_run(store, {"a": "met"}) for _ in range(3)]
    res = run_kvds(["io", "repro", *ids, "--predict", "3", "--sims", "20", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)["summary"]  # harness/emit.py's envelope (repro files no run)
    assert doc["compare"]["repeated"] == 1 and set(doc["predict"]["3"]["points"]) == {"mq-deadline/a"}
    assert doc["predict_rule"] == "paired"
    bad = run_kvds(["io", "repro", ids[0], "--predict", "2"], kvds_env, timeout=60)
    assert bad.returncode == 2 and "integers >= 3" in bad.stderr and "Traceback" not in bad.stderr
    bench = store.new_run("io-bench", {})
    bench.write_summary({"schema": "kvds.io-bench/1"})
    res = run_kvds(["io", "repro", bench.run_id], kvds_env, timeout=60)
    assert res.returncode == 2 and "not a kvds io sweep run" in res.stderr
