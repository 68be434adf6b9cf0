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
from net_priority.summary import VariantFigures

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
    network_ns: np.ndarray | None = None    # per fetch: done - sent (net_priority/fetch_clocks.py); None: older file
    wake_late_ns: np.ndarray | None = None  # per fetch: issued - max(due, previous done)
    stall: dict[str, Any] | None = None     # fetch_clocks.stall_of: stalled or not, and the evidence


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


def _stalled(r: RepSamples) -> bool:
    return bool(r.stall and r.stall.get("stalled"))


def _network(reps: list[RepSamples]) -> list[np.ndarray] | None:
    """Per repetition network time (us), None when a repetition predates the per-fetch clocks."""
    if any(r.network_ns is None for r in reps):
        return None
    return _us([r.network_ns for r in reps])  # type: ignore[misc]


def interference(reps: list[RepSamples], ref: list[RepSamples], keep: list[bool] | None = None
                  ) -> tuple[dict[str, Any] | None, dict[str, Any], str]:
    """p99 / the unloaded reference's, paired by repetition, on the controlled clock (network time; e2e for runs
    without it) and on e2e; `keep` selects the pairs (the stall-free ones)."""
    if keep is not None:
        reps, ref = [r for r, k in zip(reps, keep) if k], [u for u, k in zip(ref, keep) if k]
    e2e = _est(stats.paired_rep_ratio(_us([r.latency_ns for r in reps]), _us([u.latency_ns for u in ref]), 99.0))
    net, net_ref = _network(reps), _network(ref)
    if net is None or net_ref is None:
        return None, e2e, "e2e"
    return _est(stats.paired_rep_ratio(net, net_ref, 99.0)), e2e, "network"


def variant_figures(reps: list[RepSamples], unloaded: list[RepSamples] | None, baseline: list[RepSamples] | None,
                    rate_mbit: float, mapping: str | None, classes: dict[str, Any],
                    step_ms: float) -> VariantFigures:
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
    net = _network(reps)
    wake = None if any(r.wake_late_ns is None for r in reps) else _us([r.wake_late_ns for r in reps])
    stalls = [r.stall for r in reps]
    goal = goal_free = inter_net = None
    clock = "e2e"
    if unloaded is not None and unloaded is not reps and share is not None:
        inter_net, _, clock = interference(reps, unloaded)
        goal = judge_goal(inter_net if clock == "network" else inter99, share, clock)
        free = [not (_stalled(r) or _stalled(u)) for r, u in zip(reps, unloaded)]
        if not all(free):
            ctl, e2e, clock_free = interference(reps, unloaded, free)
            goal_free = judge_goal(ctl if clock_free == "network" else e2e, share, clock_free)
            goal_free["pairs"] = sum(free)
    return VariantFigures(
        mapping=mapping, classes=classes, reps=len(reps), fetches=int(pooled.size),
        late_fetches=int(sum(r.late for r in reps)), latency_us=_pct_table(lat, QS),
        service_us=_pct_table(svc, (50.0, 99.0)), per_size_p99_us=per_size, per_rep_p99_us=per_rep,
        interference_p99=inter99, interference_p50=inter50, bulk_mbit=bulk_est,
        bulk_mbit_per_rep=bulk or None, bulk_share=share, bulk_kept=kept, qdisc=_qdisc_total(reps),
        ebpf=_ebpf_total(reps), goal=goal, network_us=_pct_table(net, QS) if net is not None else None,
        wake_late_us=_pct_table(wake, (50.0, 99.0)) if wake is not None else None,
        interference_p99_network=inter_net, goal_clock=clock if goal is not None else None,
        stalls=stalls if any(st is not None for st in stalls) else None,
        stalled_reps=sum(_stalled(r) for r in reps), goal_stall_free=goal_free)


def _estimate(d: dict[str, Any]) -> stats.Estimate:
    def f(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan
    return stats.Estimate(f(d.get("value")), f(d.get("lo")), f(d.get("hi")), d.get("conf", 0.95),
                          d.get("reason", ""), d.get("n"))


def judge_goal(inter99: dict[str, Any], share: dict[str, Any], clock: str = "e2e") -> dict[str, Any]:
    """The goal: fetch p99 within 1.5 x unloaded (on `clock`: network time, what the classes and pacing control, or
    e2e) AND bulk >= 80% of the bottleneck, each from its interval."""
    label = "fetch network p99 / unloaded " if clock == "network" else "fetch p99 / unloaded "
    parts = [stats.judge_at_most(_estimate(inter99), GOAL_FACTOR, label),
             stats.judge_at_least(_estimate(share), GOAL_BULK_SHARE, "bulk / bottleneck rate ")]
    status = stats.judge_all(parts)
    return {"status": status, "parts": [p.as_dict() for p in parts],
            "text": f"{status}: " + "; ".join(str(p) for p in parts)}


def anchor_ratio(kvds_means: list[float], tool_means: list[float], tol: float = 0.10) -> dict[str, Any]:
    """kvds's mean ping-pong latency / the standard tool's, per repetition means; met within +-10%."""
    e = stats.rep_mean_ratio(kvds_means, tool_means)
    v = stats.judge_within(e, 1.0, tol, "kvds / sockperf ")
    return {"ratio": _est(e), "verdict": v.as_dict(), "text": str(v)}
