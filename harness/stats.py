"""Honest statistics: percentiles from raw samples, bootstrap confidence intervals, alternating runs.

Percentiles use NumPy's default (linear interpolation between order statistics). When samples come in
repetitions, intervals come from a cluster bootstrap over the repetitions (rep_percentiles, rep_ratio,
rep_mean_ratio): the repetitions are resampled whole, the bootstrap's standard error is taken on a log scale,
corrected for the few repetitions (k / (k - 1)) and turned into an interval with Student t at k - 1 degrees of
freedom. A percentile interval of resampled repetitions alone covers far less than its nominal 95% with 3-5
repetitions (it can never reach beyond the most extreme repetition); the t step restores coverage
(tests/core/test_stats.py measures it). Fewer than MIN_REPS repetitions give a point estimate without an interval.
A single flat sample (no repetitions) keeps the plain i.i.d. percentile bootstrap.
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
    reason: str = ""        # why the interval (or the value itself) is missing: "n too small: ..."
    n: int | None = None    # samples behind a percentile (or repetitions behind a per-repetition figure)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "lo": self.lo, "hi": self.hi, "conf": self.conf}
        if self.reason:
            out["reason"] = self.reason
        if self.n is not None:
            out["n"] = self.n
        return out

    def __str__(self) -> str:
        if not math.isfinite(self.value):
            return f"- ({self.reason or 'no data'})"
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return f"{self.value:.4g} (point estimate{': ' + self.reason if self.reason else ''})"
        return f"{self.value:.4g} [{self.lo:.4g}, {self.hi:.4g}]"


def _as_groups(samples: Any) -> list[np.ndarray]:
    """A flat array is one group; a list of arrays is one group per repetition."""
    if isinstance(samples, np.ndarray) and samples.ndim == 1:
        return [samples]
    if isinstance(samples, (list, tuple)) and samples and not np.isscalar(samples[0]):
        return [np.asarray(g, dtype=float) for g in samples if len(g)]
    return [np.asarray(samples, dtype=float)]


def _is_reps(samples: Any) -> bool:
    """A list of arrays is repetitions (even one: an interval over one repetition is not printed)."""
    return isinstance(samples, (list, tuple)) and bool(samples) and not np.isscalar(samples[0])


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
    """Each percentile with a bootstrap confidence interval: over repetitions (rep_percentiles: no interval
    below MIN_REPS) when `samples` is a list of repetitions (arrays), i.i.d. when it is one flat array."""
    groups = _as_groups(samples)
    if _is_reps(samples):
        return rep_percentiles(groups, qs, conf, n_boot, seed, tail_rule=False)
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
    """p_q(a) / p_q(b) with a bootstrap interval (a and b resampled independently; over repetitions, as
    rep_ratio, when either side comes in several)."""
    ga, gb = _as_groups(a), _as_groups(b)
    if _is_reps(a) or _is_reps(b):
        return rep_ratio(ga, gb, q, conf, n_boot, seed, tail_rule=False)
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


def mean_ci(values: Sequence[float], floor: float | None = None, min_n: int | None = None) -> Estimate:
    """Mean with a 95% Student-t interval (for per-seed or per-repetition figures); `floor` clips the interval
    for quantities that cannot go below it (throughput, counts: floor=0). Fewer than `min_n` values (default
    MIN_REPS) give the mean alone: two repetitions make a t interval 12.7 standard errors wide."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Estimate(math.nan, math.nan, math.nan, reason="no data", n=0)
    m = float(v.mean())
    need = MIN_REPS if min_n is None else max(2, min_n)
    if v.size < need:
        return Estimate(m, math.nan, math.nan, reason=too_few_reps(int(v.size), need), n=int(v.size))
    half = t_quantile(v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
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
            ev = f"{e.value:.3g} [{e.lo:.3g}, {e.hi:.3g}]" + (f"; {self.reason}" if self.reason else "")
        elif not math.isfinite(e.value):
            ev = f"no estimate: {self.reason or 'no data'}"
        else:
            ev = f"{e.value:.3g} (point estimate{': ' + self.reason if self.reason else ''})"
        return f"{self.status} (goal {self.goal}: {ev})"


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _interval_missing(e: Estimate) -> str:
    if e.lo is None or e.hi is None or not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return e.reason or "no interval"
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


def verdict_from_dict(d: dict[str, Any] | None) -> str:
    """A stored Verdict.as_dict() printed the way str(Verdict) prints it (reports read verdicts back)."""
    if not d:
        return "-"
    v = Verdict(d.get("status", INCONCLUSIVE), d.get("goal", "?"),
                Estimate(_nan(d.get("value")), _nan(d.get("lo")), _nan(d.get("hi")), d.get("conf", 0.95)),
                d.get("reason", ""))
    return str(v)


def verdict_of(status: str, goal: str, e: Estimate, reason: str) -> Verdict:
    """A verdict set by a fact rather than an interval (a failed validation is never met)."""
    return Verdict(status, goal, e, reason)


def _nan(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


# ---------------------------------------------------------------------------------------------------------------
# Intervals over repetitions. Every figure kvds judges comes from k repetitions of a run, and runs drift (another
# tenant, the host's writeback, thermal state): the repetition is the independent unit, not the single read.

def too_few_reps(k: int, need: int = MIN_REPS) -> str:
    return f"n too small: {k} repetition{'s' if k != 1 else ''}, an interval needs >= {need} (point estimate)"


def too_few_samples(n: int, q: float) -> str:
    return f"n too small: {n} samples, p{q:g} needs >= {min_samples_for(q)}"


def t_quantile(df: float, conf: float = 0.95) -> float:
    """Two-sided Student t critical value (exact table at 95%, Cornish-Fisher expansion otherwise)."""
    if df <= 0:
        return math.inf
    if abs(conf - 0.95) < 1e-12:
        d = int(math.floor(df))
        return _T95[d - 1] if d <= len(_T95) else 1.96 + 2.4 / d
    from statistics import NormalDist

    p = 1 - (1 - conf) / 2
    if df < 1.5:
        return math.tan(math.pi * (p - 0.5))
    if df < 2.5:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


_GRID = 1500  # candidate values for the resampled pooled percentile (between the repetitions' own percentiles)


def _weights(k: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """n_boot x k multinomial counts: how often each repetition is drawn in one cluster resample."""
    picks = rng.integers(0, k, (n_boot, k))
    return (picks[:, :, None] == np.arange(k)).sum(axis=1).astype(float)


def _boot_pooled_percentile(groups: list[np.ndarray], q: float, w: np.ndarray) -> np.ndarray:
    """The pooled q-th percentile of each cluster resample (row of w), all resamples at once: the pooled
    sample with repetition i counted w_i times reaches the q-th fraction of its size at the first grid value
    where sum_i w_i * #(g_i <= x) >= q/100 * sum_i w_i * |g_i|; that value lies between the repetitions'
    own q-th percentiles."""
    srt = [np.sort(g) for g in groups]
    own = [float(np.percentile(g, q)) for g in srt]
    pooled = np.sort(np.concatenate(srt))
    i0 = max(int(np.searchsorted(pooled, min(own), "left")) - 1, 0)
    i1 = min(int(np.searchsorted(pooled, max(own), "right")) + 1, pooled.size)
    grid = pooled[i0:i1]
    if grid.size > _GRID:
        grid = grid[np.linspace(0, grid.size - 1, _GRID).astype(int)]
    counts = np.stack([np.searchsorted(g, grid, "right") for g in srt]).astype(float)  # k x G
    sizes = np.array([g.size for g in srt], dtype=float)
    reached = (w @ counts) >= (q / 100.0) * (w @ sizes)[:, None]
    idx = np.where(reached.any(axis=1), reached.argmax(axis=1), grid.size - 1)
    return grid[idx]


def _log_se(point: float, boot: np.ndarray, k: int) -> tuple[float, bool]:
    """The bootstrap standard error, on a log scale when everything is positive (latencies, ratios), inflated
    by k / (k - 1): resampling k repetitions under-states the spread of their mean by that factor."""
    log = point > 0 and bool(np.all(boot > 0))
    vals = np.log(boot) if log else boot
    return float(np.std(vals)) * math.sqrt(k / (k - 1)), log


def _t_interval(point: float, se: float, log: bool, df: float, conf: float) -> tuple[float, float]:
    t = t_quantile(df, conf)
    if log:
        return point * math.exp(-t * se), point * math.exp(t * se)
    return point - t * se, point + t * se


def rep_percentiles(groups: Sequence[Any], qs: Sequence[float] = DEFAULT_QS, conf: float = 0.95,
                    n_boot: int = 1000, seed: int = 0, tail_rule: bool = True,
                    min_reps: int = MIN_REPS) -> dict[float, Estimate]:
    """Pooled percentiles of repetitions with cluster-bootstrap t intervals. tail_rule: a percentile with fewer
    than MIN_BEYOND samples beyond it has no value ("n too small"); fewer than `min_reps` repetitions: the
    value alone, marked as a point estimate."""
    gs = [np.asarray(g, dtype=float) for g in groups if len(g)]
    n = int(sum(g.size for g in gs))
    k = len(gs)
    out: dict[float, Estimate] = {}
    if n == 0:
        return {q: Estimate(math.nan, math.nan, math.nan, conf, "no data", 0) for q in qs}
    point = percentiles(gs, qs)
    w = _weights(k, n_boot, np.random.default_rng(seed)) if k >= max(2, min_reps) else None
    for q in qs:
        if tail_rule and not tail_supported(n, q):
            out[q] = Estimate(math.nan, math.nan, math.nan, conf, too_few_samples(n, q), n)
        elif w is None:
            out[q] = Estimate(point[q], math.nan, math.nan, conf, too_few_reps(k, max(2, min_reps)), n)
        else:
            se, log = _log_se(point[q], _boot_pooled_percentile(gs, q, w), k)
            lo, hi = _t_interval(point[q], se, log, k - 1, conf)
            out[q] = Estimate(point[q], lo, hi, conf, "", n)
    return out


def welch_df(se_a: float, ka: int, se_b: float, kb: int) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two means with standard errors se_a, se_b."""
    num = (se_a ** 2 + se_b ** 2) ** 2
    den = se_a ** 4 / (ka - 1) + se_b ** 4 / (kb - 1)
    return num / den if den > 0 else float(min(ka, kb) - 1)


def rep_ratio(a: Sequence[Any], b: Sequence[Any], q: float = 99.0, conf: float = 0.95, n_boot: int = 1000,
              seed: int = 0, tail_rule: bool = True, min_reps: int = MIN_REPS) -> Estimate:
    """p_q(a) / p_q(b) of two sets of repetitions (an interference factor, a cross-suite comparison), each side
    resampled by repetition; log-scale t interval with Welch's degrees of freedom."""
    ga = [np.asarray(g, dtype=float) for g in a if len(g)]
    gb = [np.asarray(g, dtype=float) for g in b if len(g)]
    head = _pooled_ratio(ga, gb, q, conf, min(len(ga), len(gb)), tail_rule, min_reps)
    if isinstance(head, Estimate):
        return head
    value, pa, pb, n = head
    rng = np.random.default_rng(seed)
    se_a, _ = _log_se(pa, _boot_pooled_percentile(ga, q, _weights(len(ga), n_boot, rng)), len(ga))
    se_b, _ = _log_se(pb, _boot_pooled_percentile(gb, q, _weights(len(gb), n_boot, rng)), len(gb))
    se = math.hypot(se_a, se_b)
    lo, hi = _t_interval(value, se, True, welch_df(se_a, len(ga), se_b, len(gb)), conf)
    return Estimate(value, lo, hi, conf, "", n)


def _pooled_ratio(ga: list[np.ndarray], gb: list[np.ndarray], q: float, conf: float, k: int, tail_rule: bool,
                  min_reps: int) -> Estimate | tuple[float, float, float, int]:
    """(p_q(a) / p_q(b), p_q(a), p_q(b), the smaller pool's size) of pooled repetitions, or the Estimate that says
    why no interval can follow (no data, a tail without samples beyond it, k < min_reps repetitions)."""
    na, nb = int(sum(g.size for g in ga)), int(sum(g.size for g in gb))
    if not na or not nb:
        return Estimate(math.nan, math.nan, math.nan, conf, "no data", min(na, nb))
    if tail_rule and not (tail_supported(na, q) and tail_supported(nb, q)):
        return Estimate(math.nan, math.nan, math.nan, conf, too_few_samples(min(na, nb), q), min(na, nb))
    pa, pb = percentiles(ga, (q,))[q], percentiles(gb, (q,))[q]
    value = pa / pb if pb else math.inf
    need = max(2, min_reps)
    if k < need or not (pa > 0 and pb > 0):
        return Estimate(value, math.nan, math.nan, conf, too_few_reps(k, need) if k < need else "zero percentile",
                        min(na, nb))
    return value, pa, pb, min(na, nb)


def paired_rep_ratio(a: Sequence[Any], b: Sequence[Any], q: float = 99.0, conf: float = 0.95, n_boot: int = 1000,
                     seed: int = 0, tail_rule: bool = True, min_reps: int = MIN_REPS) -> Estimate:
    """p_q(a) / p_q(b) when repetition i of a and repetition i of b ran side by side (the same window, the same
    device state): each resample draws *pairs*, so a drift both sides share (a device's median moving between
    repetitions) cancels instead of widening the interval as it does in rep_ratio. The point is the same
    pooled ratio as rep_ratio's; log-scale t interval with k - 1 degrees of freedom (k pairs)."""
    pairs = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in zip(a, b) if len(x) and len(y)]
    ga, gb = [x for x, _ in pairs], [y for _, y in pairs]
    k = len(pairs)
    head = _pooled_ratio(ga, gb, q, conf, k, tail_rule, min_reps)
    if isinstance(head, Estimate):
        return head
    value, _, _, n = head
    w = _weights(k, n_boot, np.random.default_rng(seed))  # one draw of pairs serves both sides
    ratio = _boot_pooled_percentile(ga, q, w) / _boot_pooled_percentile(gb, q, w)
    se, log = _log_se(value, ratio, k)
    lo, hi = _t_interval(value, se, log, k - 1, conf)
    return Estimate(value, lo, hi, conf, "", n)


def rep_mean_ratio(a: Sequence[float], b: Sequence[float], conf: float = 0.95, n_boot: int = 1000,
                   seed: int = 0, min_reps: int = MIN_REPS) -> Estimate:
    """mean(a) / mean(b) of per-repetition figures (spill MB/s kept relative to the baseline's), the same way."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = va[np.isfinite(va)], vb[np.isfinite(vb)]
    if not va.size or not vb.size:
        return Estimate(math.nan, math.nan, math.nan, conf, "no data", 0)
    ma, mb = float(va.mean()), float(vb.mean())
    value = ma / mb if mb else math.inf
    k = min(va.size, vb.size)
    need = max(2, min_reps)
    if k < need or not (ma > 0 and mb > 0):
        return Estimate(value, math.nan, math.nan, conf, too_few_reps(k, need) if k < need else "zero mean", k)
    rng = np.random.default_rng(seed)
    wa, wb = _weights(va.size, n_boot, rng), _weights(vb.size, n_boot, rng)
    ba, bb = (wa @ va) / wa.sum(axis=1), (wb @ vb) / wb.sum(axis=1)
    se_a, log_a = _log_se(ma, ba, va.size)
    se_b, log_b = _log_se(mb, bb, vb.size)
    if not (log_a and log_b):  # a repetition at zero MB/s: a ratio's log scale does not apply; linear delta
        ra = np.where(bb > 0, ba / np.where(bb > 0, bb, 1), np.nan)
        se = float(np.nanstd(ra)) * math.sqrt(k / (k - 1))
        lo, hi = _t_interval(value, se, False, k - 1, conf)
        return Estimate(value, max(0.0, lo), hi, conf, "", k)
    se = math.hypot(se_a, se_b)
    lo, hi = _t_interval(value, se, True, welch_df(se_a, va.size, se_b, vb.size), conf)
    return Estimate(value, lo, hi, conf, "", k)
