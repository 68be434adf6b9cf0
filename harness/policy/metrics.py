"""Metric definitions (one place) and their aggregation over seeds with confidence intervals.

dc_miss_ratio   decode-critical misses / decode-critical accesses (not / unique blocks)
hi_miss_ratio   the same, restricted to requests with priority >= 70
step_p50_us, step_p99_us   percentiles of per-decode-step latency (steps with a decode-critical access)
spills, prefetches          counts; prefetch_hit_ratio = prefetched blocks later accessed / prefetches
"""
from __future__ import annotations

import math

import numpy as np

from harness.policy.simulator import SimResult
from harness.stats import Estimate, mean_ci

METRICS = ("dc_miss_ratio", "hi_miss_ratio", "step_p50_us", "step_p99_us", "spills", "prefetches",
           "prefetch_hit_ratio")


def run_metrics(res: SimResult) -> dict[str, float]:
    """The scalar metrics of one simulated (or replayed) run."""
    lat = res.step_latency_us
    p50, p99 = (np.percentile(lat, [50, 99]).tolist() if lat.size else (math.nan, math.nan))
    return {
        "dc_accesses": float(res.dc_accesses),
        "dc_misses": float(res.dc_misses),
        "dc_miss_ratio": res.dc_miss_ratio,
        "hi_miss_ratio": res.hi_miss_ratio,
        "step_p50_us": float(p50),
        "step_p99_us": float(p99),
        "spills": float(res.spills),
        "prefetches": float(res.prefetches),
        "prefetch_hit_ratio": res.prefetch_used / res.prefetches if res.prefetches else 0.0,
    }


def aggregate(per_seed: list[dict[str, float]]) -> dict[str, Estimate]:
    """Mean and 95% Student-t interval of every metric across seeds."""
    keys = per_seed[0].keys() if per_seed else ()
    return {k: mean_ci([m[k] for m in per_seed]) for k in keys}


def fmt(e: Estimate, scale: float = 1.0, digits: int = 3) -> str:
    """'0.142 ±0.004' style cell (half-width of the interval)."""
    if math.isnan(e.value):
        return "n/a"
    v = e.value * scale
    if math.isnan(e.lo):
        return f"{v:.{digits}g}"
    half = (e.hi - e.lo) / 2 * scale
    return f"{v:.{digits}g} ±{half:.2g}"
