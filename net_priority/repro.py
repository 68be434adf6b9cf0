"""Does `kvds net bench`'s verdict repeat? Stored runs re-judged by today's rule and compared variant by variant,
and the chance that back-to-back runs of a given size agree, predicted from the repetitions they recorded.

Re-judging: each run's samples-<variant>.npz (per repetition e2e, network time, wake-up lateness) and the stall
evidence in its summary go through net_priority.estimates.variant_figures again, so a run filed before a rule
changed is judged as a new one would be (a run from before the per-fetch clocks is judged on e2e, as it was).

The prediction (a model, stated): per variant, the log of each repetition's p99 ratio to the unloaded repetition
that ran beside it (on the goal's clock, stall-free pairs only) is normal across repetitions, with the mean and
spread of the pooled pairs of the given runs (runs pooled: the spread between runs is part of it); the bulk share
per repetition likewise normal. A simulated run of k repetitions draws k of each, forms the paired ratio's
interval (log-scale mean, t with k - 1 degrees of freedom, as harness.stats.paired_rep_ratio's interval is built)
and the share's mean interval, and judges them with the bench's own rule (estimates.judge_goal). P(same verdict in
n runs) = the sum over verdicts of P(verdict)^n.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness import stats
from harness.results import Run
from net_priority.config import BASELINE, UNLOADED
from net_priority.estimates import GOAL_BULK_SHARE, GOAL_FACTOR, RepSamples, judge_goal, variant_figures

STATUSES = (stats.MET, stats.MISSED, stats.INCONCLUSIVE)
SIMS = 4000


def _reps(run: Run, variant: str, stalls: list[dict[str, Any]] | None, bulk: list[float] | None) -> list[RepSamples]:
    path = run.path / f"samples-{variant.replace('/', '_')}.npz"
    out = []
    with np.load(path) as z:
        i = 0
        while f"latency_ns_{i}" in z.files:
            has = f"network_ns_{i}" in z.files
            out.append(RepSamples(latency_ns=z[f"latency_ns_{i}"], service_ns=z[f"service_ns_{i}"],
                                  size=z[f"size_{i}"], late=0,
                                  bulk_mbit=bulk[i] if bulk and i < len(bulk) else None,
                                  network_ns=z[f"network_ns_{i}"] if has else None,
                                  wake_late_ns=z[f"wake_late_ns_{i}"] if has else None,
                                  stall=stalls[i] if stalls and i < len(stalls) else None))
            i += 1
    return out


def rejudge(run: Run) -> dict[str, dict[str, Any]]:
    """Per variant of a stored run: its figures as today's rule computes them from the run's samples."""
    s = run.summary
    cfg = s["config"]
    reps = {name: _reps(run, name, v.get("stalls"), v.get("bulk_mbit_per_rep")) for name, v in s["variants"].items()}
    out = {}
    for name, v in s["variants"].items():
        f = variant_figures(reps[name], reps.get(UNLOADED), reps.get(BASELINE), cfg["rate_mbit"], v.get("mapping"),
                            v.get("classes") or {}, cfg["step_ms"])
        out[name] = {"figures": f.as_dict(), "reps": reps[name]}
    return out


def compare(runs: list[Run]) -> tuple[list[dict[str, Any]], dict[str, list[tuple[list[RepSamples], list[RepSamples]]]]]:
    """Rows per variant: each run's re-judged verdict (with its stall count and the stall-free verdict), whether
    all agree; and per variant the (variant, unloaded) repetitions of every run, for the prediction."""
    judged = [(r, rejudge(r)) for r in runs]
    names = list(dict.fromkeys(n for _, j in judged for n in j))
    rows, pairs = [], {}
    for name in names:
        cells = []
        for run, j in judged:
            f = j.get(name, {}).get("figures")
            g = (f or {}).get("goal")
            cells.append({"run": run.run_id, "status": g["status"] if g else None,
                          "text": g["text"] if g else None, "clock": (f or {}).get("goal_clock"),
                          "stalled_reps": (f or {}).get("stalled_reps", 0), "reps": (f or {}).get("reps"),
                          "stall_free": ((f or {}).get("goal_stall_free") or {}).get("status")})
            if name in j and UNLOADED in j and name != UNLOADED:
                pairs.setdefault(name, []).append((j[name]["reps"], j[UNLOADED]["reps"]))
        statuses = [c["status"] for c in cells if c["status"] is not None]
        rows.append({"variant": name, "cells": cells, "same": len(set(statuses)) == 1 if statuses else None})
    return rows, pairs


def _clock(r: RepSamples) -> np.ndarray:
    return r.network_ns if r.network_ns is not None else r.latency_ns


def _free(r: RepSamples) -> bool:
    return not (r.stall and r.stall.get("stalled"))


def predict(pairs: list[tuple[list[RepSamples], list[RepSamples]]], rate_mbit: float, k: int, n_runs: int = 3,
            seed: int = 0) -> dict[str, Any]:
    """Chances of met / missed / inconclusive for a run of k repetitions, and of n_runs runs agreeing."""
    logs, shares = [], []
    for reps, ref in pairs:
        for a, b in zip(reps, ref):
            if not (_free(a) and _free(b)) or not stats.tail_supported(a.latency_ns.size, 99.0) \
                    or not stats.tail_supported(b.latency_ns.size, 99.0):
                continue
            logs.append(math.log(np.percentile(_clock(a), 99) / np.percentile(_clock(b), 99)))
            if a.bulk_mbit is not None:
                shares.append(a.bulk_mbit / rate_mbit)
    if len(logs) < 3 or len(shares) < 3:
        return {"pairs": len(logs), "reason": "fewer than 3 stall-free repetition pairs with a p99 each"}
    rng = np.random.default_rng(seed)
    mu, sd = float(np.mean(logs)), float(np.std(logs, ddof=1))
    smu, ssd = float(np.mean(shares)), float(np.std(shares, ddof=1))
    t = stats.t_quantile(k - 1)
    counts = dict.fromkeys(STATUSES, 0)
    for _ in range(SIMS):
        x = rng.normal(mu, sd, k)
        m, se = x.mean(), x.std(ddof=1) / math.sqrt(k)
        inter = {"value": math.exp(m), "lo": math.exp(m - t * se), "hi": math.exp(m + t * se)}
        y = rng.normal(smu, ssd, k)
        sm, sse = y.mean(), y.std(ddof=1) / math.sqrt(k)
        share = {"value": sm, "lo": sm - t * sse, "hi": sm + t * sse}
        counts[judge_goal(inter, share, "network")["status"]] += 1
    chance = {s: c / SIMS for s, c in counts.items()}
    return {"pairs": len(logs), "reps": k, "runs": n_runs, "chance": chance,
            "all_same": sum(p ** n_runs for p in chance.values()),
            "log_ratio_mean": mu, "log_ratio_sd": sd, "share_mean": smu, "share_sd": ssd,
            "limits": {"p99_ratio": GOAL_FACTOR, "bulk_share": GOAL_BULK_SHARE}}
