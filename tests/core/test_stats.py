"""Statistics: percentiles from raw samples, bootstrap intervals, alternating order."""

from __future__ import annotations

import math

import numpy as np

from harness.stats import (alternating_order, bootstrap_percentiles, bootstrap_ratio, mean_ci, percentiles,
                           run_alternating)


def test_percentiles_match_numpy_on_known_data() -> None:
    data = np.arange(1, 101, dtype=float)
    p = percentiles(data, (50, 99))
    assert p[50] == 50.5 and math.isclose(p[99], 99.01)


def test_bootstrap_interval_covers_true_quantile() -> None:
    rng = np.random.default_rng(1)
    hits = 0
    for seed in range(20):
        sample = rng.exponential(1.0, 2000)
        est = bootstrap_percentiles(sample, (50,), n_boot=300, seed=seed)[50]
        assert est.lo <= est.value <= est.hi
        hits += est.lo <= math.log(2) <= est.hi
    assert hits >= 16  # 95% intervals: 20 trials rarely miss more than 4 times


def test_cluster_bootstrap_widens_with_rep_variation() -> None:
    rng = np.random.default_rng(2)
    same = [rng.normal(10, 1, 500) for _ in range(6)]
    shifted = [rng.normal(10 + 3 * (i % 2), 1, 500) for i in range(6)]
    w_same = bootstrap_percentiles(same, (50,), n_boot=300)[50]
    w_shift = bootstrap_percentiles(shifted, (50,), n_boot=300)[50]
    assert (w_shift.hi - w_shift.lo) > 3 * (w_same.hi - w_same.lo)


def test_ratio_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.exponential(4.0, 5000), rng.exponential(1.0, 5000)
    r = bootstrap_ratio(a, b, 99, n_boot=300)
    assert r.lo < 4.0 < r.hi and r.lo <= r.value <= r.hi


def test_mean_ci_t_interval() -> None:
    est = mean_ci([1.0, 2.0, 3.0])
    assert est.value == 2.0 and math.isclose(est.hi - 2.0, 4.303 * 1.0 / math.sqrt(3), rel_tol=1e-6)


def test_alternating_order_is_abba() -> None:
    assert alternating_order(["a", "b"], 3) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
    seen = []
    out = run_alternating({"a": lambda r: ("a", r), "b": lambda r: ("b", r)}, 2, lambda r, n: seen.append(n))
    assert seen == ["a", "b", "b", "a"] and out["a"] == [("a", 0), ("a", 1)]


def test_verdict_rule_uses_the_whole_interval() -> None:
    from harness.stats import Estimate, judge_at_least, judge_at_most, judge_within, judge_all
    assert judge_at_most(Estimate(0.73, 0.2, 4.8), 1.5).status == "inconclusive"
    assert judge_at_most(Estimate(1.0, 0.8, 1.2), 1.5).status == "met"
    assert judge_at_most(Estimate(2.0, 1.6, 2.4), 1.5).status == "missed"
    assert judge_at_least(Estimate(0.6, 0.55, 0.7), 0.5).status == "met"
    assert judge_at_least(Estimate(0.3, 0.1, 0.4), 0.5).status == "missed"
    assert judge_at_least(Estimate(0.6, 0.4, 0.7), 0.5).status == "inconclusive"
    # two-sided: a reader that under-reports by half is outside +-10%, not "within"
    assert judge_within(Estimate(0.5, 0.45, 0.55), 1.0, 0.10).status == "missed"
    assert judge_within(Estimate(1.02, 0.95, 1.08), 1.0, 0.10).status == "met"
    assert judge_within(Estimate(1.05, 0.95, 1.2), 1.0, 0.10).status == "inconclusive"
    no_interval = judge_at_most(Estimate(0.5, math.nan, math.nan), 1.5)
    assert no_interval.status == "inconclusive" and "(point estimate" in str(no_interval)
    assert "[0.2, 4.8]" in str(judge_at_most(Estimate(0.73, 0.2, 4.8), 1.5))
    met, missed, inc = (judge_at_most(Estimate(1, .9, 1.1), 2), judge_at_most(Estimate(3, 2.5, 3.5), 2),
                        judge_at_most(Estimate(2, 1, 3), 2))
    assert judge_all([met, met]) == "met" and judge_all([met, inc]) == "inconclusive"
    assert judge_all([inc, missed]) == "missed"
    assert judge_at_most(Estimate(1, 0.9, 1.1), 2).as_dict()["lo"] == 0.9
    assert judge_at_most(Estimate(1, math.nan, math.nan), 2).as_dict()["lo"] is None


def test_tail_needs_samples_beyond_it() -> None:
    from harness.stats import min_samples_for, tail_supported
    assert min_samples_for(99.0) == 1000 and min_samples_for(99.9) == 10000 and min_samples_for(50) == 20
    assert not tail_supported(1200, 99.9) and tail_supported(10000, 99.9) and tail_supported(1000, 99)


# --- coverage: does a nominal 95% interval over repetitions contain the truth 95% of the time? -------------------
# Synthetic reads: log-normal within a repetition (median 100 us, sigma 0.6), each repetition scaled by its own
# drift drawn uniformly from +-25% (another tenant, writeback, thermal state). The true percentile is that of the
# whole process (drift included), computed by quadrature; a second "suite" is the same process 1.3x slower, so the
# true cross-suite p99 ratio is exactly 1.3. 200 trials of 5 repetitions x 1,000 reads.
MU, SIGMA, DRIFT, SLOWER = math.log(100.0), 0.6, 0.25, 1.3


def _true_percentile(q: float, scale: float = 1.0) -> float:
    drifts = np.linspace(1 - DRIFT, 1 + DRIFT, 201)

    def cdf(x: float) -> float:
        z = (np.log(x / (drifts * scale)) - MU) / (SIGMA * math.sqrt(2))
        return float(np.mean(0.5 * (1 + np.vectorize(math.erf)(z))))

    lo, hi = 1.0, 1e5
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if cdf(mid) < q / 100 else (lo, mid)
    return mid


def _suite(rng: np.random.Generator, reps: int, n: int, scale: float = 1.0) -> list[np.ndarray]:
    return [rng.lognormal(MU, SIGMA, n) * rng.uniform(1 - DRIFT, 1 + DRIFT) * scale for _ in range(reps)]


def test_interval_over_repetitions_covers_with_drift() -> None:
    from harness.stats import rep_percentiles, rep_ratio

    p50, p99 = _true_percentile(50), _true_percentile(99)
    ratio = _true_percentile(99, SLOWER) / p99
    assert abs(ratio - SLOWER) < 1e-6
    rng = np.random.default_rng(11)
    hits = {"p50": 0, "p99": 0, "ratio": 0}
    trials = 200
    for t in range(trials):
        a, b = _suite(rng, 5, 1000), _suite(rng, 5, 1000, SLOWER)
        est = rep_percentiles(a, (50.0, 99.0), n_boot=200, seed=t)
        r = rep_ratio(b, a, 99.0, n_boot=200, seed=t)
        hits["p50"] += est[50.0].lo <= p50 <= est[50.0].hi
        hits["p99"] += est[99.0].lo <= p99 <= est[99.0].hi
        hits["ratio"] += r.lo <= ratio <= r.hi
    coverage = {k: v / trials for k, v in hits.items()}
    assert all(c >= 0.90 for c in coverage.values()), coverage


def test_no_interval_below_min_reps_and_no_unsupported_tail() -> None:
    from harness.stats import MIN_REPS, rep_mean_ratio, rep_percentiles, rep_ratio

    rng = np.random.default_rng(5)
    two = _suite(rng, MIN_REPS - 1, 2000)
    est = rep_percentiles(two, (50.0, 99.0))
    assert math.isfinite(est[50.0].value) and math.isnan(est[50.0].lo) and "n too small" in est[50.0].reason
    assert "point estimate" in str(est[50.0])
    r = rep_ratio(two, two, 99.0)
    assert r.value == 1.0 and math.isnan(r.hi) and "n too small" in r.reason
    few = rep_percentiles(_suite(rng, 5, 240), (50.0, 99.0, 99.9))  # 1,200 reads: p99 yes, p99.9 no
    assert math.isfinite(few[99.0].lo) and math.isnan(few[99.9].value) and "10000" in few[99.9].reason
    assert math.isnan(mean_ci([1.0, 2.0]).hi) and "n too small" in mean_ci([1.0, 2.0]).reason
    kept = rep_mean_ratio([50.0, 55.0, 45.0], [100.0, 110.0, 90.0])
    assert kept.value == 0.5 and kept.lo < 0.5 < kept.hi
    assert math.isnan(rep_mean_ratio([50.0, 55.0], [100.0, 110.0]).lo)


def test_verdict_from_too_few_reps_is_inconclusive_and_says_why() -> None:
    from harness.stats import judge_at_most, rep_ratio

    rng = np.random.default_rng(6)
    v = judge_at_most(rep_ratio(_suite(rng, 2, 2000), _suite(rng, 2, 2000), 99.0), 1.5)
    assert v.status == "inconclusive" and "n too small" in str(v)


def test_paired_ratio_cancels_a_drift_both_sides_share() -> None:
    """Two tools measured side by side in each repetition, the device's speed drifting between repetitions
    (+-60%, the same for both in a pair): the paired interval still covers the true ratio (1.3) and is much
    narrower than rep_ratio's, which treats the shared drift as noise of each side."""
    from harness.stats import paired_rep_ratio, rep_ratio

    rng = np.random.default_rng(5)
    hits, widths = 0, {"paired": [], "unpaired": []}
    trials = 200
    for t in range(trials):
        drift = rng.uniform(0.4, 1.6, 6)
        a = [rng.lognormal(MU, SIGMA, 1000) * d for d in drift]
        b = [rng.lognormal(MU, SIGMA, 1000) * d * SLOWER for d in drift]
        p = paired_rep_ratio(b, a, 50.0, n_boot=200, seed=t)
        u = rep_ratio(b, a, 50.0, n_boot=200, seed=t)
        hits += p.lo <= SLOWER <= p.hi
        widths["paired"].append(p.hi / p.lo)
        widths["unpaired"].append(u.hi / u.lo)
    assert hits / trials >= 0.90, hits
    assert np.median(widths["paired"]) < 0.5 * np.median(widths["unpaired"]), {
        k: float(np.median(v)) for k, v in widths.items()}


def test_paired_ratio_refuses_what_rep_ratio_refuses() -> None:
    from harness.stats import MIN_REPS, paired_rep_ratio

    rng = np.random.default_rng(2)
    few = paired_rep_ratio([rng.lognormal(size=2000)] * (MIN_REPS - 1), [rng.lognormal(size=2000)] * (MIN_REPS - 1))
    assert math.isfinite(few.value) and math.isnan(few.lo) and "repetitions" in few.reason
    thin = paired_rep_ratio([rng.lognormal(size=100)] * 5, [rng.lognormal(size=100)] * 5, 99.0)
    assert math.isnan(thin.value) and thin.reason
