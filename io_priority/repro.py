"""Does a sweep's verdict repeat? Stored sweeps compared point by point, and how often sweeps of a given size
would agree, predicted from the repetitions those sweeps recorded (`kvds io repro`).

Why a prediction: whether three back-to-back sweeps agree is a matter of chance for every point, and of size for
most. A point whose true interference (or spill kept) sits well away from its limit gets the same verdict once its
interval is narrow enough; a point whose true value sits on a limit stays inconclusive only while its interval
straddles the limit, and a narrower interval lands it on either side at random. The prediction says which kind
each point is, and what a default size buys, before the slot is spent on it.

The model (documented, not the sweep's own resampling): each variant's per-repetition stall-free service p99 and
per-repetition spill MB/s are log-normal across repetitions, with the mean and spread of the pooled repetitions
of the given sweeps (back-to-back runs pooled: the spread between runs is part of it). A simulated sweep of k
repetitions draws k of each, forms the sweep's two estimates the way harness/stats.py does (a ratio with a
log-scale Welch t interval) and judges them with io_priority.goal.judge, the same rule (reference stability
included) the sweep applies.

The paired rule (`--rule paired`, what a sweep applies since 2026-12-01): the interference is resampled by the
repetitions that ran side by side with the unloaded reference (io_priority.pairing). Stored sweeps judged before it
are re-judged from their samples (`rejudge`: the same stall finding, the stall-free service time, the pairs from the
run's own `rep_order`). Its prediction model keeps what pairing exploits: each point's log per-repetition p99 is
drawn given its side-by-side reference repetition's (a linear regression on the log scale fitted to the stored
pairs, `Given`), so a drift both saw is shared by the simulated pair as it was by the measured one, and the
interference interval is the paired one (log-ratio mean, t with k - 1 degrees of freedom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from harness import stats
from harness.results import Run
from io_priority import clocks as clockmod, pairing, stalls as stallmod
from io_priority.auto_grow import Grow, grow_step
from io_priority.clocks import finite
from io_priority.goal import goal_interference, goal_summary, judge
from io_priority.summary import SWEEP_SCHEMA
from io_priority.workload import RepResult

STATUSES = (stats.MET, stats.MISSED, stats.INCONCLUSIVE)


def point_name(p: dict[str, Any]) -> str:
    return f"{p['scheduler']}/{p['variant']}"


def _est_text(e: dict[str, Any] | None) -> str:
    if not e or not finite(e.get("value")):
        return "-"
    lo, hi = e.get("lo"), e.get("hi")
    if finite(lo) and finite(hi):
        return f"{e['value']:.2f} [{lo:.2f}, {hi:.2f}]"
    return f"{e['value']:.2f}"


@dataclass(frozen=True)
class Judged:
    """A sweep's summary as some rule judged it (a stored Run's own, or re-judged from its samples)."""

    run_id: str
    summary: dict[str, Any]


def _load_reps(run: Run, sched: str, variant: str, n: int) -> list[RepResult]:
    """A variant's repetitions back from the samples the sweep stored (latencies, clocks, spill writes, block
    pairs): what stall finding and the service clock need. Reader and writer counters are not stored per
    repetition and are not needed here."""
    names = set(run.sample_names())
    out = []
    for k in range(n):
        base = f"{sched}--{variant}-rep{k}"
        get = lambda suffix: run.samples(base + suffix) if base + suffix in names else None  # noqa: E731
        lat = run.samples(base)
        out.append(RepResult(lat, {}, None, None, clocks=get("-clocks"), wlog=get("-wlog"), blk_pairs=get("-blk")))
    return out


def rejudge(run: Run, paired: bool = True) -> Judged:
    """A stored sweep judged again from its samples: each point's stall-free service-time interference resampled
    by the repetitions that ran side by side with its reference (paired) or independently (not), then
    goal.judge (spill kept and the reference's stability as stored: pairing does not change them)."""
    import copy

    s = copy.deepcopy(run.summary)
    if s.get("schema") != SWEEP_SCHEMA:
        from harness.errors import UserError
        raise UserError(f"{run.run_id} is not a kvds io sweep run (schema {s.get('schema')!r})")
    stall_ms = (s.get("config") or {}).get("stall_ms") or stallmod.DEFAULT_STALL_MS
    for sched, doc in s["schedulers"].items():
        order = [(int(r), str(v)) for r, v in doc["rep_order"]]
        reps = {v: _load_reps(run, sched, v, int(m["reps"])) for v, m in doc["modes"].items()}
        keep = {v: [~f.affected for f in stallmod.find_all(rs, stall_ms)] for v, rs in reps.items()}
        ref = clockmod._aligned(reps["unloaded"], keep["unloaded"], "service")
        for p in s["points"]:
            if p["scheduler"] != sched:
                continue
            g = clockmod._aligned(reps[p["variant"]], keep[p["variant"]], "service")
            pairs = pairing.side_by_side(order, p["variant"], "unloaded") if paired else None
            e, how = pairing.ratio(g, ref, pairs)
            p["interference_service"] = {"value": e.value, "lo": e.lo, "hi": e.hi, "conf": e.conf,
                                         "n": e.n, "pairing": how, **({"reason": e.reason} if e.reason else {})}
            p.pop("goal", None)
    judge(s["points"], s["schedulers"])
    s["goal"] = goal_summary(s["points"], s["schedulers"])
    return Judged(run.run_id, s)


def compare(runs: Sequence[Run | Judged]) -> dict[str, Any]:
    """Each point's verdict in each stored sweep, with the interval it was judged from, and whether it repeated.
    Points absent from some sweep are listed with "-" there and never count as repeated."""
    order: list[str] = []
    cells: dict[str, list[dict[str, Any] | None]] = {}
    for i, run in enumerate(runs):
        s = run.summary
        if s.get("schema") != SWEEP_SCHEMA:
            from harness.errors import UserError
            raise UserError(f"{run.run_id} is not a kvds io sweep run (schema {s.get('schema')!r})")
        for p in s.get("points", []):
            name = point_name(p)
            if name not in cells:
                order.append(name)
                cells[name] = [None] * len(runs)
            inter, _ = goal_interference(p)
            cells[name][i] = {"status": (p.get("goal") or {}).get("status", "-"), "interference": inter,
                              "kept": p.get("spill_retained_est"), "stalls": p.get("stalls"),
                              "reps": p.get("reps"),
                              "text": f"{_est_text(inter)} / {_est_text(p.get('spill_retained_est'))} / "
                                      f"{p.get('stalls') if p.get('stalls') is not None else '-'} / "
                                      f"{p.get('reps') or '-'}"}
    rows = []
    for name in order:
        cs = cells[name]
        statuses = [c["status"] if c else "-" for c in cs]
        rows.append({"point": name, "cells": cs, "statuses": statuses,
                     "same": "-" not in statuses and len(set(statuses)) == 1})
    judged = [r for r in rows if r["statuses"][0] != "reference"]
    return {"runs": [r.run_id for r in runs], "rows": rows,
            "repeated": sum(r["same"] for r in judged), "judged": len(judged),
            "elapsed_s": [(r.summary.get("config", {}).get("rounds") or [{}])[-1].get("elapsed_s") for r in runs]}


@dataclass(frozen=True)
class LogNormal:
    """Mean and standard deviation of log(x) over repetitions (x > 0)."""

    mu: float
    sigma: float
    n: int

    @classmethod
    def fit(cls, xs: Sequence[float]) -> "LogNormal | None":
        v = np.asarray([x for x in xs if x is not None and math.isfinite(x) and x > 0], dtype=float)
        if v.size < 2:
            return None
        lg = np.log(v)
        return cls(float(lg.mean()), float(lg.std(ddof=1)), int(v.size))

    def draw(self, k: int, rng: np.random.Generator) -> np.ndarray:
        return np.exp(rng.normal(self.mu, self.sigma, k))


@dataclass(frozen=True)
class Given:
    """log p99 of a point's repetition given its side-by-side reference repetition's: intercept + slope x log
    p99(reference) + N(0, sigma), fitted by least squares to the stored pairs. A slope near 0 says the pair shared
    nothing (pairing then changes nothing); near 1, a drift both saw."""

    intercept: float
    slope: float
    sigma: float
    n: int

    @classmethod
    def fit(cls, pairs: Sequence[tuple[float, float]]) -> "Given | None":
        v = np.asarray([(a, b) for a, b in pairs if _pos(a) and _pos(b)], dtype=float).reshape(-1, 2)
        if v.shape[0] < 3:
            return None
        lp, lu = np.log(v[:, 0]), np.log(v[:, 1])
        var_u = float(lu.var(ddof=1))
        slope = float(np.cov(lp, lu, ddof=1)[0, 1] / var_u) if var_u > 0 else 0.0
        intercept = float(lp.mean() - slope * lu.mean())
        resid = lp - intercept - slope * lu
        return cls(intercept, slope, float(math.sqrt((resid ** 2).sum() / (v.shape[0] - 2))) if v.shape[0] > 2
                   else 0.0, int(v.shape[0]))

    def draw(self, ref: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.exp(self.intercept + self.slope * np.log(ref) + rng.normal(0.0, self.sigma, ref.size))


def _pos(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def fit(runs: Sequence[Run | Judged]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per scheduler and variant: log-normal fits of the per-repetition stall-free service p99 ("p99") and spill
    MB/s ("mbs"), pooled over the given sweeps' repetitions; and, for every loaded variant, its p99 given its
    side-by-side reference repetition's ("given", from the pairs of each run's rep_order; None under 3 pairs)."""
    pooled: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for run in runs:
        for sched, doc in run.summary.get("schedulers", {}).items():
            modes = doc.get("modes", {})
            order = doc.get("rep_order") or []
            uref = (modes.get("unloaded") or {}).get("per_rep_service_p99_us") or []
            for label, m in modes.items():
                d = pooled.setdefault(sched, {}).setdefault(label, {"p99": [], "mbs": [], "given": []})
                mine = m.get("per_rep_service_p99_us") or []
                d["p99"] += [x for x in mine if x is not None]
                d["mbs"] += [x for x in (m.get("spill_mb_s_per_rep") or []) if x is not None]
                if label != "unloaded":
                    d["given"] += [(mine[p.a], uref[p.b]) for p in pairing.side_by_side(order, label, "unloaded")
                                   if p.a < len(mine) and p.b < len(uref)]
    return {s: {v: {"p99": LogNormal.fit(d["p99"]), "mbs": LogNormal.fit(d["mbs"]),
                    "given": Given.fit(d["given"]) if v != "unloaded" else None}
                for v, d in vs.items()}
            for s, vs in pooled.items()}


def _ratio(a: np.ndarray, b: np.ndarray, log_scale_values: bool) -> dict[str, Any]:
    """a / b with a log-scale Welch t interval: of geometric means when the values are per-repetition
    percentiles (the pooled percentile's log standard error is about that of their log mean), of arithmetic
    means for throughputs (as stats.rep_mean_ratio)."""
    k_a, k_b = a.size, b.size
    if log_scale_values:
        la, lb = np.log(a), np.log(b)
        value = math.exp(la.mean() - lb.mean())
        se_a, se_b = la.std(ddof=1) / math.sqrt(k_a), lb.std(ddof=1) / math.sqrt(k_b)
    else:
        value = a.mean() / b.mean()
        se_a = a.std(ddof=1) / (a.mean() * math.sqrt(k_a))
        se_b = b.std(ddof=1) / (b.mean() * math.sqrt(k_b))
    se = math.hypot(se_a, se_b)
    t = stats.t_quantile(stats.welch_df(se_a, k_a, se_b, k_b))
    return {"value": value, "lo": value * math.exp(-t * se), "hi": value * math.exp(t * se), "conf": 0.95}


def _paired_ratio(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """a / b of side-by-side pairs of per-repetition percentiles: the geometric mean of the pairs' ratios with a
    log-scale t interval of k - 1 degrees of freedom (as stats.paired_rep_ratio)."""
    d = np.log(a) - np.log(b)
    value = math.exp(d.mean())
    se = d.std(ddof=1) / math.sqrt(d.size)
    t = stats.t_quantile(d.size - 1)
    return {"value": value, "lo": value * math.exp(-t * se), "hi": value * math.exp(t * se), "conf": 0.95}


def _judged(model: dict[str, dict[str, dict[str, Any]]], p99: dict[tuple[str, str], np.ndarray],
            mbs: dict[tuple[str, str], np.ndarray], points: Sequence[tuple[str, str]],
            refs: dict[tuple[str, str], np.ndarray] | None = None) -> list[dict[str, Any]]:
    """The points of one simulated sweep, judged by io_priority.goal.judge. refs: each point's side-by-side
    reference repetitions (the paired rule), else the reference's repetitions are resampled apart."""
    pts = []
    per = {}
    for s, v in points:
        inter = (_paired_ratio(p99[(s, v)], refs[(s, v)]) if refs is not None
                 else _ratio(p99[(s, v)], p99[(s, "unloaded")], True))
        pts.append({"scheduler": s, "variant": v,
                    "interference_service": inter,
                    "spill_retained_est": _ratio(mbs[(s, v)], mbs[(s, "baseline")], False)})
        per[s] = {"modes": {"unloaded": {"per_rep_service_p99_us": list(p99[(s, "unloaded")])}}}
    judge(pts, per)
    return pts


def simulate_sweep(model: dict[str, dict[str, dict[str, Any]]], points: Sequence[tuple[str, str]],
                   k: int, rng: np.random.Generator, grow: Grow | None = None,
                   s_per_rep: float = 6.4, paired: bool = False) -> dict[str, Any]:
    """One simulated sweep of k repetitions per variant, grown as the sweep grows (auto_grow.grow_step, on a clock of
    `s_per_rep` seconds per variant-repetition): each point's verdict and the sweep's simulated seconds.
    paired: each point's repetition is drawn given the reference repetition beside it (model "given") and the
    interference is the paired ratio; every point is paired with the same reference draws, as in a sweep."""
    if k < stats.MIN_REPS:
        raise ValueError(f"a sweep needs >= {stats.MIN_REPS} repetitions for an interval")
    scheds = sorted({s for s, _ in points})
    p99: dict[tuple[str, str], np.ndarray] = {}
    mbs: dict[tuple[str, str], np.ndarray] = {}
    for s in scheds:
        p99[(s, "unloaded")] = model[s]["unloaded"]["p99"].draw(k, rng)
        mbs[(s, "baseline")] = model[s]["baseline"]["mbs"].draw(k, rng)
        p99[(s, "baseline")] = model[s]["baseline"]["p99"].draw(k, rng) if model[s]["baseline"]["p99"] else None
    refs: dict[tuple[str, str], np.ndarray] | None = {} if paired else None

    def draw_point(s: str, v: str, ref: np.ndarray) -> np.ndarray:
        if refs is None:
            return model[s][v]["p99"].draw(ref.size, rng)
        refs[(s, v)] = np.concatenate([refs.get((s, v), np.zeros(0)), ref])
        return model[s][v]["given"].draw(ref, rng)

    for s, v in points:
        p99[(s, v)], mbs[(s, v)] = draw_point(s, v, p99[(s, "unloaded")]), model[s][v]["mbs"].draw(k, rng)
    reps = k * (len(points) + 2 * len(scheds))
    while True:
        pts = _judged(model, p99, mbs, points, refs)
        step = grow_step(pts, grow, reps * s_per_rep, reps)
        if not step["more"]:
            break
        for s, names in step["more"].items():
            new_ref = model[s]["unloaded"]["p99"].draw(step["step"], rng)  # names[0] is the unloaded reference
            for v in names:
                new = new_ref if v == "unloaded" else draw_point(s, v, new_ref)
                p99[(s, v)] = np.concatenate([p99[(s, v)], new])
                if v != "unloaded":
                    mbs[(s, v)] = np.concatenate([mbs[(s, v)], model[s][v]["mbs"].draw(step["step"], rng)])
                reps += step["step"]
    return {"verdicts": {point_name(p): p["goal"]["status"] for p in pts}, "seconds": reps * s_per_rep}


def predict(model: dict[str, dict[str, dict[str, Any]]], points: Sequence[tuple[str, str]],
            sizes: Sequence[int], sims: int = 2000, runs: int = 3, seed: int = 0,
            grow: Grow | None = None, s_per_rep: float = 6.4,
            paired: bool = False) -> dict[int, dict[str, Any]]:
    """Per size: each point's chance of met / missed / inconclusive in one sweep, the chance that `runs`
    independent sweeps give it the same verdict (sum of p^runs), the chance that every point repeats at once
    (counted over simulated groups of `runs` sweeps, so the shared reference's correlation is kept), and the
    simulated sweep's seconds (median, max)."""
    usable = [(s, v) for s, v in points if model.get(s, {}).get(v, {}).get("p99") and model[s][v].get("mbs")
              and model[s].get("unloaded", {}).get("p99") and model[s].get("baseline", {}).get("mbs")
              and (not paired or model[s][v].get("given"))]
    out: dict[int, dict[str, Any]] = {}
    for k in sizes:
        rng = np.random.default_rng(seed + k)
        sw = [simulate_sweep(model, usable, k, rng, grow, s_per_rep, paired) for _ in range(sims * runs)]
        draws = [d["verdicts"] for d in sw]
        per_point = {}
        for s, v in usable:
            name = f"{s}/{v}"
            counts = {st: sum(d[name] == st for d in draws) / len(draws) for st in STATUSES}
            per_point[name] = {**counts, "same": sum(p ** runs for p in counts.values())}
        groups = [draws[i * runs:(i + 1) * runs] for i in range(sims)]
        all_same = sum(all(len({g[name] for g in grp}) == 1 for name in per_point) for grp in groups) / sims
        secs = sorted(d["seconds"] for d in sw)
        out[k] = {"points": per_point, "all_same": all_same, "sims": sims,
                  "seconds_median": secs[len(secs) // 2], "seconds_max": secs[-1]}
    return out


def loaded_points(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """The judged points of the given sweeps (every scheduler x loaded variant but the baseline), in order."""
    seen: list[tuple[str, str]] = []
    for run in runs:
        for p in run.summary.get("points", []):
            key = (p["scheduler"], p["variant"])
            if p["variant"] != "baseline" and key not in seen:
                seen.append(key)
    return seen
