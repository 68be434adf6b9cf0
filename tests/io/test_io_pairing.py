"""Interference and the kvds/fio ratios resampled by the repetitions that ran side by side (io_priority.pairing):
which repetitions pair (from the order as run), and that a drift both sides share cancels. Constructed repetitions:
the rule under test is the statistics, not a device."""

from __future__ import annotations

import math

import numpy as np

from harness import stats
from harness.mapping import load_mapping
from io_priority import fio, pairing, repro, variant_figures
from io_priority.variant_runs import Variant
from io_priority.workload import RepResult

MS = 1_000_000


def _grown_order() -> list[tuple[int, str]]:
    """A sweep's order: a first round of 2 repetitions of four variants, then spill-v2 grown (reps 2-3), then
    intent-paced grown (reps 4-5), each growth round with the unloaded reference."""
    first = stats.alternating_order(["unloaded", "baseline", "intent-paced", "spill-v2"], 2)
    grow_s = stats.alternating_order(["unloaded", "spill-v2"], 4)[4:]
    grow_p = stats.alternating_order(["unloaded", "intent-paced"], 6)[8:]
    return first + grow_s + grow_p


def test_pairs_are_the_repetitions_of_one_round_not_list_positions() -> None:
    pairs = pairing.side_by_side(_grown_order(), "intent-paced", "unloaded")
    # intent-paced's 3rd and 4th repetitions ran with the unloaded reference's 5th and 6th (reps 4, 5); the
    # reference's 3rd and 4th ran with spill-v2 and must not be paired with intent-paced
    assert [(p.a, p.b, p.rep) for p in pairs] == [(0, 0, 0), (1, 1, 1), (2, 4, 4), (3, 5, 5)]
    assert [p.between for p in pairs] == [1, 1, 0, 0]
    spill = pairing.side_by_side(_grown_order(), "spill-v2", "unloaded")
    assert [(p.a, p.b) for p in spill] == [(0, 0), (1, 1), (2, 2), (3, 3)] and spill[0].between == 2
    # fio-check: kvds and fio run back to back in every round, with or without the io_uring A/B variants
    order = stats.alternating_order(["kvds", "fio", *fio.URING_VARIANTS], 4)
    assert [(p.a, p.b, p.between) for p in pairing.side_by_side(order, "kvds", "fio")] == [(k, k, 0) for k in range(4)]


def _rep(service_ns: np.ndarray) -> RepResult:
    due = np.arange(service_ns.size, dtype=np.int64) * 5 * MS
    clk = np.stack([due, due, due + service_ns], axis=1)
    return RepResult(clk[:, 2] - clk[:, 0], {"reads": service_ns.size, "errors": 0, "late": 0}, None, None, clocks=clk)


def _drifting(factor: float, drift: list[float], seed: int) -> list[RepResult]:
    """Repetitions whose device is `drift[k]` times slower in repetition k (a drift every side shares)."""
    rng = np.random.default_rng(seed)
    return [_rep((rng.lognormal(math.log(200e3), 0.3, 1200) * d * factor).astype(np.int64)) for d in drift]


def test_a_drift_both_sides_share_cancels_in_the_judged_interference() -> None:
    drift = [1.0, 4.0, 1.5, 6.0, 2.0, 3.0]  # the device's median moved 6x between repetitions, for both
    results = {"unloaded": _drifting(1.0, drift, 1), "separated": _drifting(1.2, drift, 2)}
    variants = [Variant("unloaded", None), Variant("separated", load_mapping("spill-v2"))]
    order = stats.alternating_order(["unloaded", "separated"], len(drift))
    paired = variant_figures.summarize(variants, results, "io_uring", n_boot=400, order=order)["separated"]
    inter = paired["stall_free"]["interference"]["service"]
    assert inter["pairing"]["rule"] == pairing.PAIRED and inter["pairing"]["pairs"] == 6
    assert inter["pairing"]["max_between"] == 0
    # true ratio 1.2: resampled by pair, the interval says <= 1.5 (met); independently it cannot
    assert 1.0 < inter["lo"] < 1.2 < inter["hi"] < 1.5, inter
    assert stats.judge_at_most(variant_figures.estimate_of(inter), 1.5).status == stats.MET
    assert paired["interference_factor"]["pairing"]["rule"] == pairing.PAIRED
    unpaired = variant_figures.summarize(variants, results, "io_uring", n_boot=400)["separated"]
    other = unpaired["stall_free"]["interference"]["service"]
    assert other["pairing"]["rule"] == pairing.UNPAIRED and other["hi"] > 1.5
    assert other["value"] == inter["value"]  # the same pooled ratio: only the interval differs


def test_too_few_pairs_fall_back_to_the_unpaired_ratio_and_say_so() -> None:
    a, b = [np.full(100, 2.0)] * 4, [np.full(100, 1.0)] * 4
    order = [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (3, "b")]  # only reps 0 and 1 ran side by side
    est, how = pairing.ratio(a, b, pairing.side_by_side(order, "a", "b"), q=50.0)
    assert how["rule"] == pairing.UNPAIRED and how["why"] == "2 pairs < 3" and est.value == 2.0


def test_predicted_paired_sweep_draws_each_point_beside_its_reference() -> None:
    # a point that follows its reference's drift exactly (slope 1, no noise of its own) at 1.3x: drawn beside its
    # reference and judged by pair, every simulated sweep meets the goal; drawn apart with the same spread (the
    # unpaired rule), the reference's own spread widens the interval past 1.5 in most sweeps
    model = {"s": {"unloaded": {"p99": repro.LogNormal(math.log(300), 0.15, 30), "mbs": None, "given": None},
                   "baseline": {"p99": None, "mbs": repro.LogNormal(math.log(3000), 0.05, 30), "given": None},
                   "p": {"p99": repro.LogNormal(math.log(390), 0.15, 30),
                         "mbs": repro.LogNormal(math.log(2400), 0.05, 30),
                         "given": repro.Given(math.log(1.3), 1.0, 1e-3, 30)}}}
    paired = repro.predict(model, [("s", "p")], [6], sims=60, paired=True)[6]["points"]["s/p"]
    unpaired = repro.predict(model, [("s", "p")], [6], sims=60, paired=False)[6]["points"]["s/p"]
    assert paired["met"] > 0.95 and unpaired["met"] < 0.6, (paired, unpaired)
    fit = repro.Given.fit([(1.2 * u, u) for u in (200.0, 300.0, 450.0, 700.0)])
    assert fit is not None and abs(fit.slope - 1.0) < 1e-9 and abs(math.exp(fit.intercept) - 1.2) < 1e-9
