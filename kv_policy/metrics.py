"""Metric definitions (one place) and their aggregation over seeds with confidence intervals.

Misses (per access, not per unique block):
  dc_miss_ratio          decode-critical misses / decode-critical accesses
  hi|mid|low_miss_ratio  the same per priority band (>= 70, 40-69, < 40)
  noncritical_share      share of all reads that no decode step waits on (prefill re-reads)
Latency and deadlines (a step's latency = compute time + KV stall, see simulator.py):
  step_p50_us, step_p99_us   percentiles of per-decode-step latency; a percentile is reported only when at
                             least 10 steps lie beyond it (harness.stats.tail_supported), else None
  slo_attainment             share of request-steps whose step finished within the request's TPOT deadline
  slo_high|mid|low           the same per priority band
  goodput_tok_s              tokens that met their deadline per second of simulated step time (one token per
                             request-step)
Moves: spills, prefetches, prefetch_dropped (over the I/O budget), prefetch_hit_ratio, recomputes.
Prefix reuse:
  prefill_reload_tokens  prefill tokens per request whose KV was not in the fast tier (reloaded from the slow tier
                         or recomputed): non-critical misses x the block's tokens / requests
A metric with nothing to measure is None (printed "-" with its reason), never 0.0.
"""
from __future__ import annotations

import numpy as np

from kv_policy.simulator import BANDS, SimResult
from kv_policy.trace import Trace
from harness.stats import Estimate, mean_ci, tail_supported

METRICS = ("dc_miss_ratio", "hi_miss_ratio", "mid_miss_ratio", "low_miss_ratio", "slo_attainment", "slo_high",
           "slo_mid", "slo_low", "goodput_tok_s", "step_p50_us", "step_p99_us", "spills", "prefetches",
           "prefetch_dropped", "prefetch_hit_ratio", "recomputes", "noncritical_share", "prefill_reload_tokens")
SHORT_BAND = {"high": "hi", "mid": "mid", "low": "low"}


def _pct(lat: np.ndarray, q: float) -> float | None:
    return float(np.percentile(lat, q)) if lat.size and tail_supported(lat.size, q) else None


def _block_tokens(trace: Trace | None) -> int | None:
    prof = (trace.meta.get("profile") or {}) if trace is not None else {}
    return prof.get("block_tokens")


def run_metrics(res: SimResult, trace: Trace | None = None) -> dict[str, float | None]:
    """The scalar metrics of one simulated (or replayed) run (`trace` gives the per-request prefix figure)."""
    lat = res.step_latency_us
    met = res.slo_met()
    out: dict[str, float | None] = {
        "dc_accesses": float(res.dc_accesses),
        "dc_misses": float(res.dc_misses),
        "dc_miss_ratio": res.dc_miss_ratio,
    }
    for i, band in enumerate(BANDS):
        out[f"{SHORT_BAND[band]}_miss_ratio"] = res.band_miss_ratio(i)
    out["slo_attainment"] = float(met.mean()) if met.size else None
    for i, band in enumerate(BANDS):
        sel = met[res.rs_band == i]
        out[f"slo_{band}"] = float(sel.mean()) if sel.size else None
    total_s = float(lat.sum()) / 1e6
    out["goodput_tok_s"] = float(met.sum()) / total_s if total_s > 0 else None
    out["step_p50_us"] = float(np.percentile(lat, 50)) if lat.size else None
    out["step_p99_us"] = _pct(lat, 99.0)
    out.update(spills=float(res.spills), prefetches=float(res.prefetches),
               prefetch_dropped=float(res.prefetch_dropped),
               prefetch_hit_ratio=res.prefetch_used / res.prefetches if res.prefetches else None,
               recomputes=float(res.recomputes),
               noncritical_share=(res.accesses - res.dc_accesses) / res.accesses if res.accesses else None)
    tokens, requests = _block_tokens(trace), (trace.meta.get("requests") if trace is not None else None)
    out["prefill_reload_tokens"] = ((res.misses - res.dc_misses) * tokens / requests
                                    if tokens and requests else None)
    return out


def aggregate(per_seed: list[dict[str, float | None]]) -> dict[str, Estimate]:
    """Mean and 95% Student-t interval of every metric across the seeds that have it (NaN when none has)."""
    keys = per_seed[0].keys() if per_seed else ()
    return {k: mean_ci([m[k] for m in per_seed if m.get(k) is not None]) for k in keys}


def paired(per_seed: list[dict], ref: list[dict], metric: str, how: str = "reduction") -> Estimate:
    """Per-seed comparison with a reference policy on the same traces, then a t-interval over seeds.

    reduction: 1 - x / ref (a miss cut); difference: x - ref (an attainment gain)."""
    vals = []
    for a, b in zip(per_seed, ref):
        x, r = a.get(metric), b.get(metric)
        if x is None or r is None:
            continue
        if how == "reduction":
            if r > 0:
                vals.append(1.0 - x / r)
        else:
            vals.append(x - r)
    return mean_ci(vals)


def gap_closed(per_seed: list[dict], lru: list[dict], opt: list[dict], metric: str = "dc_miss_ratio") -> Estimate:
    """Per seed (lru - x) / (lru - opt): the share of the LRU-to-optimum distance a policy covers."""
    vals = []
    for a, b, c in zip(per_seed, lru, opt):
        x, r, o = a.get(metric), b.get(metric), c.get(metric)
        if None not in (x, r, o) and r - o > 0:
            vals.append((r - x) / (r - o))
    return mean_ci(vals)
