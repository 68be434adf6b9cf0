"""From the repetitions' raw samples to a variant's figures and the goal's verdict (pure: tested on made-up
repetitions). Percentiles are pooled over repetitions with intervals that resample repetitions
(harness.stats); interference pairs repetition r of a variant with repetition r of the unloaded reference,
which ran next to it in the alternating order."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness import stats
from net_priority.summary import NetVariantFigures

GOAL_FACTOR = 1.5      # decode-critical fetch p99 within 1.5 x unloaded ...
GOAL_BULK_SHARE = 0.8  # ... while the bulk transfer keeps >= 80% of the bottleneck rate
QS = (50.0, 90.0, 99.0)


@dataclass
class RepSamples:
    """One repetition of one variant, as the endpoints measured it."""
    latency_ns: np.ndarray            # per fetch: done - intended
    service_ns: np.ndarray            # per fetch: done - issued
    size: np.ndarray                  # per fetch: bytes
    late: int                         # fetches issued more than one step late
    bulk_mbit: float | None           # bulk throughput during the fetch window (None: no bulk mover)
    qdisc: dict[str, Any] = field(default_factory=dict)  # per class counter deltas over the fetch window
    ebpf: dict[str, Any] | None = None


def _est(e: stats.Estimate) -> dict[str, Any]:
    """An Estimate as stored: a missing value or bound is None (null), never NaN."""
    d = e.as_dict()
    for k in ("value", "lo", "hi"):
        d[k] = d[k] if math.isfinite(d[k]) else None
    return d


def _us(groups: list[np.ndarray]) -> list[np.ndarray]:
    return [g.astype(float) / 1000.0 for g in groups]


def _pct_table(groups: list[np.ndarray], qs: tuple[float, ...]) -> dict[str, Any]:
    ests = stats.rep_percentiles(groups, qs)
    return {f"p{q:g}": _est(ests[q]) for q in qs}


def _qdisc_total(reps: list[RepSamples]) -> dict[str, Any] | None:
    out: dict[str, dict[str, float]] = {}
    for r in reps:
        for cls, counters in (r.qdisc or {}).items():
            acc = out.setdefault(cls, {})
            for k, v in counters.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    acc[k] = acc.get(k, 0) + v
    return out or None


def _ebpf_total(reps: list[RepSamples]) -> dict[str, Any] | None:
    docs = [r.ebpf for r in reps if r.ebpf]
    return {"per_rep": docs} if docs else None


def variant_figures(reps: list[RepSamples], unloaded: list[RepSamples] | None, baseline: list[RepSamples] | None,
                    rate_mbit: float, mapping: str | None, classes: dict[str, Any],
                    step_ms: float) -> NetVariantFigures:
    lat = _us([r.latency_ns for r in reps])
    svc = _us([r.service_ns for r in reps])
    sizes = np.concatenate([r.size for r in reps]) if reps else np.zeros(0)
    pooled = np.concatenate(lat) if lat else np.zeros(0)
    per_size: dict[str, Any] = {}
    for s in sorted(set(sizes.tolist())):
        sel = pooled[sizes == s]
        per_size[str(int(s))] = float(np.percentile(sel, 99)) if stats.tail_supported(sel.size, 99.0) else None
    per_rep = [float(np.percentile(g, 99)) if stats.tail_supported(g.size, 99.0) else None for g in lat]
    inter99 = inter50 = None
    if unloaded is not None and unloaded is not reps:
        ref = _us([r.latency_ns for r in unloaded])
        inter99 = _est(stats.paired_rep_ratio(lat, ref, 99.0))
        inter50 = _est(stats.paired_rep_ratio(lat, ref, 50.0))
    bulk = [r.bulk_mbit for r in reps if r.bulk_mbit is not None]
    bulk_est = share = kept = None
    if bulk:
        bulk_est = _est(stats.mean_ci(bulk))
        share = _est(stats.mean_ci([b / rate_mbit for b in bulk]))
        base = [r.bulk_mbit for r in (baseline or []) if r.bulk_mbit is not None]
        if base and baseline is not reps:
            kept = _est(stats.rep_mean_ratio(bulk, base))
    goal = judge_goal(inter99, share) if inter99 is not None and share is not None else None
    return NetVariantFigures(
        mapping=mapping, classes=classes, reps=len(reps), fetches=int(pooled.size),
        late_fetches=int(sum(r.late for r in reps)), latency_us=_pct_table(lat, QS),
        service_us=_pct_table(svc, (50.0, 99.0)), per_size_p99_us=per_size, per_rep_p99_us=per_rep,
        interference_p99=inter99, interference_p50=inter50, bulk_mbit=bulk_est,
        bulk_mbit_per_rep=bulk or None, bulk_share=share, bulk_kept=kept, qdisc=_qdisc_total(reps),
        ebpf=_ebpf_total(reps), goal=goal)


def _estimate(d: dict[str, Any]) -> stats.Estimate:
    def f(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan
    return stats.Estimate(f(d.get("value")), f(d.get("lo")), f(d.get("hi")), d.get("conf", 0.95),
                          d.get("reason", ""), d.get("n"))


def judge_goal(inter99: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
    """The issue's goal: fetch p99 within 1.5 x unloaded AND bulk >= 80% of the bottleneck, each from its interval."""
    parts = [stats.judge_at_most(_estimate(inter99), GOAL_FACTOR, "fetch p99 / unloaded "),
             stats.judge_at_least(_estimate(share), GOAL_BULK_SHARE, "bulk / bottleneck rate ")]
    status = stats.judge_all(parts)
    return {"status": status, "parts": [p.as_dict() for p in parts],
            "text": f"{status}: " + "; ".join(str(p) for p in parts)}


def anchor_ratio(kvds_means: list[float], tool_means: list[float], tol: float = 0.10) -> dict[str, Any]:
    """kvds's mean ping-pong latency / the standard tool's, per repetition means; met within +-10%."""
    e = stats.rep_mean_ratio(kvds_means, tool_means)
    v = stats.judge_within(e, 1.0, tol, "kvds / sockperf ")
    return {"ratio": _est(e), "verdict": v.as_dict(), "text": str(v)}
