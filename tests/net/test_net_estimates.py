"""A variant's figures and the goal's verdict from made-up repetitions (pure: no lab)."""

import numpy as np

from net_priority.estimates import RepSamples, anchor_ratio, judge_goal, variant_figures


def _reps(scale_us: float, bulk: float | None, k: int = 5, n: int = 1200, seed: int = 0) -> list[RepSamples]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        lat = (rng.exponential(scale_us, n) + scale_us) * 1000
        out.append(RepSamples(lat.astype(np.int64), (lat * 0.9).astype(np.int64), rng.choice([16384, 65536], n),
                              late=0, bulk_mbit=None if bulk is None else bulk * rng.uniform(0.99, 1.01),
                              qdisc={"1:10": {"bytes": 100, "drops": 1}}))
    return out


def test_interference_and_bulk_share_decide_the_goal() -> None:
    unloaded, base, good = _reps(100, None), _reps(1000, 940, seed=1), _reps(110, 900, seed=2)
    f_base = variant_figures(base, unloaded, base, 1000.0, None, {}, 5.0)
    f_good = variant_figures(good, unloaded, base, 1000.0, "net-htb", {}, 5.0)
    assert f_base.interference_p99["lo"] > 5
    assert f_base.goal["status"] == "missed"
    assert f_good.interference_p99["hi"] < 1.5 and f_good.bulk_share["lo"] > 0.8
    assert f_good.goal["status"] == "met"
    assert 0.9 < f_good.bulk_kept["value"] < 1.0
    assert f_good.fetches == 6000 and f_good.qdisc["1:10"] == {"bytes": 500, "drops": 5}
    assert set(f_good.per_size_p99_us) == {"16384", "65536"}


def test_the_unloaded_reference_has_no_interference_and_no_goal() -> None:
    unloaded = _reps(100, None)
    f = variant_figures(unloaded, unloaded, None, 1000.0, None, {}, 5.0)
    assert f.interference_p99 is None and f.goal is None and f.bulk_mbit is None


def test_too_few_fetches_give_no_p99() -> None:
    few = _reps(100, None, k=3, n=100)
    f = variant_figures(few, None, None, 1000.0, None, {}, 5.0)
    assert f.latency_us["p99"]["value"] is None and "n too small" in f.latency_us["p99"]["reason"]
    assert f.per_rep_p99_us == [None, None, None]


def test_a_wide_interval_is_inconclusive() -> None:
    g = judge_goal({"value": 1.4, "lo": 1.1, "hi": 1.9}, {"value": 0.9, "lo": 0.85, "hi": 0.95})
    assert g["status"] == "inconclusive" and "[1.1, 1.9]" in g["text"]


def test_anchor_within_ten_percent() -> None:
    assert anchor_ratio([100.0, 102.0, 101.0], [99.0, 100.0, 101.0])["verdict"]["status"] == "met"
    assert anchor_ratio([150.0, 152.0, 151.0], [99.0, 100.0, 101.0])["verdict"]["status"] == "missed"


def _clocked(scale_us: float, bulk: float | None, stalled: set[int] = frozenset(), k: int = 5, n: int = 1200,
             seed: int = 0) -> list[RepSamples]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        net = ((rng.exponential(scale_us, n) + scale_us) * 1000).astype(np.int64)
        wake = np.full(n, 30_000_000 if i in stalled else 1000, dtype=np.int64)
        out.append(RepSamples(net + wake, net, rng.choice([16384, 65536], n), late=0,
                              bulk_mbit=None if bulk is None else bulk * rng.uniform(0.99, 1.01), network_ns=net,
                              wake_late_ns=wake, stall={"stalled": i in stalled, "why": "test"}))
    return out


def test_the_goal_is_judged_on_network_time_and_stalls_are_named() -> None:
    unloaded, base = _clocked(100, None, stalled={2}), _clocked(1000, 940, seed=1)
    good = _clocked(105, 900, seed=2)
    f = variant_figures(good, unloaded, base, 1000.0, "net-htb", {}, 10.0)
    assert f.goal_clock == "network" and f.goal["status"] == "met" and "network p99" in f.goal["text"]
    assert f.interference_p99_network["hi"] < 1.5 and f.network_us["p99"]["value"] > 0
    # the unloaded repetition 2 was stalled: the stall-free goal uses the 4 other pairs, and says so
    assert f.stalled_reps == 0 and f.goal_stall_free is not None and f.goal_stall_free["pairs"] == 4
    u = variant_figures(unloaded, unloaded, None, 1000.0, None, {}, 10.0)
    assert u.stalled_reps == 1 and u.wake_late_us["p99"]["value"] > 1000


def test_repro_predicts_from_stall_free_pairs() -> None:
    from net_priority.repro import predict

    unloaded, good = _clocked(100, None), _clocked(102, 900, stalled={0, 1}, seed=3)
    p = predict([(good, unloaded)] * 2, 1000.0, 5)
    assert p["pairs"] == 6 and p["chance"]["met"] > 0.9 and 0 <= p["all_same"] <= 1
    few = predict([(good[:2], unloaded[:2])], 1000.0, 5)
    assert "chance" not in few and "fewer than 3" in few["reason"]


def test_repro_rejudges_a_stored_run_from_its_samples(tmp_path) -> None:
    from harness.results import ResultStore
    from net_priority.bench_run import _write_samples
    from net_priority.repro import compare

    results = {"unloaded": _clocked(100, None), "baseline": _clocked(1000, 940, seed=1),
               "net-htb": _clocked(104, 900, stalled={3}, seed=2)}
    run = ResultStore(tmp_path).new_run("net-bench", {})
    _write_samples(run, results)
    variants = {n: variant_figures(r, results["unloaded"], results["baseline"], 1000.0, None, {}, 10.0).as_dict()
                for n, r in results.items()}
    for v, reps in zip(variants.values(), results.values()):
        v["bulk_mbit_per_rep"] = [r.bulk_mbit for r in reps] if reps[0].bulk_mbit is not None else None
    run.write_summary({"config": {"rate_mbit": 1000.0, "step_ms": 10.0, "reps": 5}, "variants": variants})
    rows, pairs = compare([run])
    by = {r["variant"]: r["cells"][0] for r in rows}
    assert by["net-htb"]["status"] == variants["net-htb"]["goal"]["status"] == "met"
    assert by["net-htb"]["clock"] == "network" and by["net-htb"]["stalled_reps"] == 1
    assert by["net-htb"]["stall_free"] == "met" and by["baseline"]["status"] == "missed"
    assert by["unloaded"]["status"] is None and set(pairs) == {"baseline", "net-htb"}
