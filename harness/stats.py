"""Honest statistics: percentiles from raw samples, bootstrap confidence intervals, alternating runs.

Percentiles use NumPy's default (linear interpolation between order statistics). Intervals are percentile
bootstraps; when samples come in repetitions, the bootstrap resamples repetitions first and samples within
them (a cluster bootstrap), so run-to-run variation widens the interval as it should.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

DEFAULT_QS = (50.0, 90.0, 99.0, 99.9)
T = TypeVar("T")


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float
    conf: float = 0.95

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "conf": self.conf}

    def __str__(self) -> str:
        return f"{self.value:.4g} [{self.lo:.4g}, {self.hi:.4g}]"


def _as_groups(samples: Any) -> list[np.ndarray]:
    """A flat array is one group; a list of arrays is one group per repetition."""
    if isinstance(samples, np.ndarray) and samples.ndim == 1:
        return [samples]
    if isinstance(samples, (list, tuple)) and samples and not np.isscalar(samples[0]):
        return [np.asarray(g, dtype=float) for g in samples if len(g)]
    return [np.asarray(samples, dtype=float)]


def percentiles(samples: Any, qs: Sequence[float] = DEFAULT_QS) -> dict[float, float]:
    arr = np.concatenate(_as_groups(samples)).astype(float)
    if arr.size == 0:
        return {q: math.nan for q in qs}
    return dict(zip(qs, np.percentile(arr, list(qs)).tolist()))


def _resample(groups: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    if len(groups) == 1:
        g = groups[0]
        return g[rng.integers(0, g.size, g.size)]
    picked = rng.integers(0, len(groups), len(groups))
    return np.concatenate([groups[i][rng.integers(0, groups[i].size, groups[i].size)] for i in picked])


def bootstrap_percentiles(samples: Any, qs: Sequence[float] = DEFAULT_QS, conf: float = 0.95,
                          n_boot: int = 1000, seed: int = 0) -> dict[float, Estimate]:
    """Each percentile with a percentile-bootstrap confidence interval."""
    groups = _as_groups(samples)
    point = percentiles(groups, qs)
    if sum(g.size for g in groups) < 2:
        return {q: Estimate(point[q], math.nan, math.nan, conf) for q in qs}
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, len(qs)))
    for i in range(n_boot):
        boots[i] = np.percentile(_resample(groups, rng), list(qs))
    a = (1 - conf) / 2
    lo = np.quantile(boots, a, axis=0)
    hi = np.quantile(boots, 1 - a, axis=0)
    return {q: Estimate(point[q], float(lo[j]), float(hi[j]), conf) for j, q in enumerate(qs)}


def bootstrap_ci(samples: Any, q: float = 99.0, conf: float = 0.95, n_boot: int = 1000, seed: int = 0) -> Estimate:
    return bootstrap_percentiles(samples, (q,), conf, n_boot, seed)[q]


def bootstrap_ratio(a: Any, b: Any, q: float = 99.0, conf: float = 0.95, n_boot: int = 1000,
                    seed: int = 0) -> Estimate:
    """p_q(a) / p_q(b) with a bootstrap interval (a and b resampled independently)."""
    ga, gb = _as_groups(a), _as_groups(b)
    pa, pb = percentiles(ga, (q,))[q], percentiles(gb, (q,))[q]
    value = pa / pb if pb else math.inf
    rng = np.random.default_rng(seed)
    ratios = np.empty(n_boot)
    for i in range(n_boot):
        rb = np.percentile(_resample(gb, rng), q)
        ratios[i] = np.percentile(_resample(ga, rng), q) / rb if rb else math.inf
    al = (1 - conf) / 2
    return Estimate(value, float(np.quantile(ratios, al)), float(np.quantile(ratios, 1 - al)), conf)


# Two-sided 95% Student t critical values for df 1..30 (beyond: normal approximation).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]


def mean_ci(values: Sequence[float], floor: float | None = None) -> Estimate:
    """Mean with a 95% Student-t interval (for per-seed or per-repetition figures); `floor` clips the interval
    for quantities that cannot go below it (throughput, counts: floor=0)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    m = float(v.mean())
    if v.size < 2:
        return Estimate(m, math.nan, math.nan)
    t = _T95[v.size - 2] if v.size - 1 <= len(_T95) else 1.96
    half = t * float(v.std(ddof=1)) / math.sqrt(v.size)
    lo = m - half if floor is None else max(floor, m - half)
    return Estimate(m, lo, m + half)


def alternating_order(names: Sequence[str], reps: int) -> list[tuple[int, str]]:
    """(repetition, variant) in ABBA order, so drift over time hits every variant alike."""
    order: list[tuple[int, str]] = []
    for r in range(reps):
        seq = list(names) if r % 2 == 0 else list(reversed(names))
        order.extend((r, n) for n in seq)
    return order


def run_alternating(variants: dict[str, Callable[[int], T]], reps: int,
                    on_step: Callable[[int, str], None] | None = None) -> dict[str, list[T]]:
    """Run each variant `reps` times in alternating order; returns results per variant in repetition order."""
    out: dict[str, list[T]] = {n: [] for n in variants}
    for r, name in alternating_order(list(variants), reps):
        if on_step:
            on_step(r, name)
        out[name].append(variants[name](r))
    return out


# ---------------------------------------------------------------------------------------------------------------
# What an interval may claim. One rule for every goal kvds judges: a goal is *met* only when the whole interval is
# on its side, *missed* when the whole interval is on the other side, otherwise *inconclusive*. A verdict always
# carries the interval it was decided from, so nothing prints a verdict without its evidence.

MIN_BEYOND = 10       # samples that must lie beyond a percentile before it is printed (p99.9 needs ~10,000)
MIN_REPS = 3          # repetitions before an interval over repetitions is printed

MET, MISSED, INCONCLUSIVE = "met", "missed", "inconclusive"


def tail_supported(n: int, q: float, min_beyond: int = MIN_BEYOND) -> bool:
    """True when n samples put at least `min_beyond` of them above the q-th percentile."""
    return round(n * (1.0 - q / 100.0), 6) >= min_beyond


def min_samples_for(q: float, min_beyond: int = MIN_BEYOND) -> int:
    """The smallest sample count that supports the q-th percentile (p99: 1,000; p99.9: 10,000)."""
    return int(math.ceil(round(min_beyond / (1.0 - q / 100.0), 6)))


@dataclass(frozen=True)
class Verdict:
    """A goal judged from an interval. `goal` says the rule in words (for example "<= 1.5", "within +-10% of 1"),
    `estimate` is the point and interval it was judged from, `reason` says why when the verdict is inconclusive
    for want of an interval."""
    status: str
    goal: str
    estimate: Estimate
    reason: str = ""

    @property
    def met(self) -> bool:
        return self.status == MET

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "goal": self.goal, "value": _finite(self.estimate.value),
                               "lo": _finite(self.estimate.lo), "hi": _finite(self.estimate.hi),
                               "conf": self.estimate.conf}
        if self.reason:
            out["reason"] = self.reason
        return out

    def __str__(self) -> str:
        e = self.estimate
        if math.isfinite(e.lo) and math.isfinite(e.hi):
            ev = f"{e.value:.3g} [{e.lo:.3g}, {e.hi:.3g}]"
        else:
            ev = f"{e.value:.3g} (no interval{': ' + self.reason if self.reason else ''})"
        return f"{self.status} (goal {self.goal}: {ev})"


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _interval_missing(e: Estimate) -> str:
    if e.lo is None or e.hi is None or not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return "no interval"
    return ""


def judge_at_most(e: Estimate, limit: float, label: str = "") -> Verdict:
    """Goal: the quantity is at most `limit` (an interference factor, a time budget)."""
    goal = f"{label}<= {limit:g}".strip()
    why = _interval_missing(e)
    if why:
        return Verdict(INCONCLUSIVE, goal, e, why)
    if e.hi <= limit:
        return Verdict(MET, goal, e)
    if e.lo > limit:
        return Verdict(MISSED, goal, e)
    return Verdict(INCONCLUSIVE, goal, e)


def judge_at_least(e: Estimate, limit: float, label: str = "") -> Verdict:
    """Goal: the quantity is at least `limit` (a share of throughput kept, a miss reduction)."""
    goal = f"{label}>= {limit:g}".strip()
    why = _interval_missing(e)
    if why:
        return Verdict(INCONCLUSIVE, goal, e, why)
    if e.lo >= limit:
        return Verdict(MET, goal, e)
    if e.hi < limit:
        return Verdict(MISSED, goal, e)
    return Verdict(INCONCLUSIVE, goal, e)


def judge_within(e: Estimate, target: float, rel_tol: float, label: str = "") -> Verdict:
    """Two-sided goal: the quantity lies within target*(1 +- rel_tol) (a ratio to a reference tool: 1 +- 10%).
    Met when the whole interval is inside the band, missed when the whole interval is outside it on one side."""
    lo_b, hi_b = target * (1 - rel_tol), target * (1 + rel_tol)
    goal = f"{label}within {target:g} +-{rel_tol * 100:g}%".strip()
    why = _interval_missing(e)
    if why:
        return Verdict(INCONCLUSIVE, goal, e, why)
    if lo_b <= e.lo and e.hi <= hi_b:
        return Verdict(MET, goal, e)
    if e.hi < lo_b or e.lo > hi_b:
        return Verdict(MISSED, goal, e)
    return Verdict(INCONCLUSIVE, goal, e)


def judge_all(verdicts: Sequence[Verdict]) -> str:
    """Several goals that must all hold (a spill kept AND an interference bound): missed if any is missed, met
    if all are met, inconclusive otherwise."""
    if any(v.status == MISSED for v in verdicts):
        return MISSED
    if verdicts and all(v.status == MET for v in verdicts):
        return MET
    return INCONCLUSIVE
