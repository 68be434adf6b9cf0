"""From the repetitions to the factorial table: per cell TPOT p50/p99 (intervals by resampling repetitions),
high-priority SLO attainment, goodput, prefill tokens recomputed, slow-tier bytes, the simulator's prediction beside
the measurement; then the two main effects and the interaction (paired by repetition) and the goals' verdicts.

A decode step's TPOT is the replayed KV stall plus the modelled compute and the modelled recompute of its step
(replay cannot run the accelerator), the same terms the simulator adds, so the ratio compares like with like.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from harness.stats import Estimate, bootstrap_percentiles, judge_at_least, judge_at_most, mean_ci
from kv_policy import simulator as sim
from kv_policy.compare import build
from kv_policy.metrics import run_metrics
from kv_policy.replay.session import PolicyReplay
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace
from e2e.cells import Cell, Prepared
from e2e.session import RepRecord
from e2e.step_stalls import KINDS, memory_us

HIGH_BAND = 0
GOALS = {"tpot_p99_ratio": 0.6, "slo_high_gain_points": 10.0, "goodput_ratio": 1.2}
RATIO_BAND = (0.5, 2.0)   # simulated vs measured TPOT p99 agree within this
MODELLED_OPS = ("hit", "miss", "spill-sync")


def tpot(pr: PolicyReplay, stall_us: np.ndarray) -> np.ndarray:
    extra = pr.recompute_us if pr.recompute_us is not None and pr.recompute_us.size == stall_us.size else 0.0
    return stall_us + extra + pr.step_us


def rep_figures(pr: PolicyReplay, t: np.ndarray) -> dict[str, float]:
    """One repetition's figures from its per-step TPOT (us)."""
    res = pr.sim
    out = {"p50_us": float(np.percentile(t, 50)) if t.size else math.nan,
           "p99_us": float(np.percentile(t, 99)) if t.size else math.nan,
           "slo": math.nan, "slo_high": math.nan, "goodput": math.nan}
    if t.size == res.step_latency_us.size and res.rs_step.size:
        met = t[res.rs_step] <= res.rs_deadline_us
        hi = met[res.rs_band == HIGH_BAND]
        out.update(slo=float(met.mean()), slo_high=float(hi.mean()) if hi.size else math.nan,
                   goodput=float(met.sum()) / (float(t.sum()) / 1e6))
    return out


def planned_bytes(pr: PolicyReplay) -> dict[str, int]:
    p = pr.plan
    reads = np.isin(p.op, (sim.OP_MISS, sim.OP_PREFETCH))
    writes = np.isin(p.op, (sim.OP_SPILL_SYNC, sim.OP_SPILL_BG))
    return {"read": int(p.nbytes[reads].sum()), "write": int(p.nbytes[writes].sum())}


def modelled_op_us(tiers: TierModel, nbytes: int) -> dict[str, float]:
    return {"hit": tiers.fast.read_us(nbytes), "miss": tiers.slow.read_us(nbytes),
            "spill-sync": tiers.slow.write_us(nbytes)}


def missing_cost(recs: list[RepRecord], tiers: TierModel, nbytes: int, steps: int) -> dict[str, Any]:
    """The cost the simulator lacks, measured: per modelled operation, (measured median - modelled) x count per
    decode step; plus the waits on background I/O and the swap-ins the model has no term for. The largest names it."""
    model = modelled_op_us(tiers, nbytes)
    parts: dict[str, float] = {}
    detail: dict[str, Any] = {}
    for op in MODELLED_OPS:
        meds = [r.op_median_us[op] for r in recs if op in r.op_median_us]
        if not meds:
            continue
        count = float(np.mean([r.op_count.get(op, 0) for r in recs]))
        med = float(np.mean(meds))
        parts[op] = (med - model[op]) * count / max(steps, 1)
        detail[op] = {"measured_median_us": med, "modelled_us": model[op], "per_rep": count,
                      "measured_p99_us": float(np.mean([r.op_p99_us.get(op, math.nan) for r in recs]))}
    swapins = float(np.mean([r.counters["majfaults"] for r in recs]))
    detail["swap_ins_per_rep"] = swapins
    detail["waits_on_background_per_rep"] = float(np.mean([r.waits for r in recs]))
    name = max(parts, key=lambda k: abs(parts[k])) if parts else None
    return {"largest": name, "excess_us_per_step": parts, "detail": detail}


def measured_costs(recs: list[RepRecord], stat: str = "median") -> dict[str, float]:
    """Per modelled operation, its median (or mean) cost (us) measured in this cell, averaged over repetitions."""
    out = {}
    for op in MODELLED_OPS:
        vals = [getattr(r, f"op_{stat}_us")[op] for r in recs if op in getattr(r, f"op_{stat}_us")]
        if vals:
            out[op] = float(np.mean(vals))
    return out


def calibrated_tiers(tiers: TierModel, medians: dict[str, float], nbytes: int) -> TierModel:
    """The tier model with each modelled operation's fixed latency refitted so its cost at this block size is the
    median the run measured (bandwidths kept): the device as it was during the run, not the defaults'."""
    fast, slow = tiers.fast, tiers.slow
    if "hit" in medians:
        fast = replace(fast, read_latency_us=max(0.0, medians["hit"] - nbytes / (fast.read_gbps * 1e3)))
    if "miss" in medians:
        slow = replace(slow, read_latency_us=max(0.0, medians["miss"] - nbytes / (slow.read_gbps * 1e3)))
    if "spill-sync" in medians:
        slow = replace(slow, write_latency_us=max(0.0, medians["spill-sync"] - nbytes / (slow.write_gbps * 1e3)))
    return replace(tiers, fast=fast, slow=slow)


def calibrated_prediction(trace: Trace, policy: str, tiers: TierModel, medians: dict[str, float],
                          nbytes: int) -> dict[str, Any]:
    """The simulator rerun for the cell's policy on the tiers calibrated from the cell's own measured op costs:
    its TPOT p99 (us) and the costs it used. Queueing behind other tenants stays outside the model (its tail)."""
    cal = calibrated_tiers(tiers, medians, nbytes)
    res = sim.simulate(trace, build(policy), cal)
    t = res.step_latency_us
    return {"tpot_p99_us": float(np.percentile(t, 99)) if t.size else math.nan,
            "op_us": {op: c for op, c in modelled_op_us(cal, nbytes).items() if op in medians}}


def swap_in_term_us(recs: list[RepRecord], steps: int, swap_in_us: float) -> float:
    """The simulator's missing swap-in cost per decode step (us): the cell's swap-ins per step (kvds's major faults
    per repetition, averaged) times one swap-in's measured cost."""
    return float(np.mean([r.counters["majfaults"] for r in recs])) / max(steps, 1) * swap_in_us


def _stalled(recs: list[RepRecord], steps: int) -> list[RepRecord]:
    """The repetitions whose per-step stalls can be used: measured, trusted, one per decode step."""
    return [r for r in recs if r.stalls and r.stalls_error is None and r.stalls["reclaim"].size == steps]


def guard_us(r: RepRecord) -> np.ndarray:
    """Per step, the measured part of the waits for the OOM guard: waits x the repetition's median response."""
    return r.stalls["guard_waits"] * float(r.kept.get("guard_response_us_median") or 0.0)


def stall_figures(pr: PolicyReplay, recs: list[RepRecord], sim_t: np.ndarray) -> dict[str, Any] | None:
    """Where the measured steps' time went (e2e/step_stalls.py), per step on average and at the tail (the steps
    at or above each repetition's TPOT p99), and the simulation with the memory stalls it lacks added step by step
    (reclaim + swap-in + the guard's response per wait): its p99 beside the measured one."""
    usable = _stalled(recs, sim_t.size)
    if not usable:
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a kind dropped in every step of a repetition: NaN, not 0
        mean = {k: float(np.nanmean([np.nanmean(r.stalls[k]) for r in usable])) for k in (*KINDS, "guard_waits")}
    tail: dict[str, list[float]] = {k: [] for k in (*KINDS, "guard_waits", "guard", "tpot", "tpot_max", "steps")}
    pred, ratios = [], []
    for r in usable:
        t = tpot(pr, r.stall_us)
        top = t >= np.percentile(t, 99)
        for k in (*KINDS, "guard_waits"):
            tail[k].append(float(np.nanmean(r.stalls[k][top])) if np.isfinite(r.stalls[k][top]).any() else 0.0)
        tail["guard"].append(float(guard_us(r)[top].mean()))
        tail["tpot"].append(float(t[top].mean()))
        tail["tpot_max"].append(float(t.max()))  # the mean of the top 1 % can sit far above the p99: say so
        tail["steps"].append(float(top.sum()))
        p = float(np.percentile(sim_t + memory_us(r.stalls) + guard_us(r), 99))
        pred.append(p)
        ratios.append(float(np.percentile(t, 99)) / p)
    at_tail = {k: float(np.mean(v)) for k, v in tail.items()}
    at_tail["rest_us"] = at_tail["tpot"] - pr.step_us - sum(at_tail[k] for k in (*KINDS, "guard"))
    glitches = dict(zip(KINDS, np.sum([r.stalls["glitches"] for r in usable], axis=0).tolist()))
    return {"reps": len(usable), "per_step_us": mean, "at_p99_steps": at_tail, "glitched_steps": glitches,
            "guard_response_us_median": float(np.mean([r.kept.get("guard_response_us_median") or 0.0
                                                       for r in usable])),
            "sim_memory_tpot_p99_us": float(np.mean(pred)), "measured_to_sim_memory_p99": _geo(ratios).as_dict()}


def cell_figures(prep: Prepared, cell: Cell, recs: list[RepRecord], swap_in_us: float | None = None
                 ) -> dict[str, Any]:
    """A cell's figures; `swap_in_us` (one swap-in's measured cost) adds the simulation with swap-ins."""
    pr = prep.work[cell.policy]
    tpots = [tpot(pr, r.stall_us) for r in recs if r.stall_us.size]
    per_rep = [rep_figures(pr, t) for t in tpots]
    pct = bootstrap_percentiles(tpots, (50.0, 99.0), n_boot=500) if tpots else {}
    m = run_metrics(pr.sim, prep.trace)
    sim_t = pr.sim.step_latency_us
    sim_p99 = float(np.percentile(sim_t, 99)) if sim_t.size else math.nan
    ratio = _geo([f["p99_us"] / sim_p99 for f in per_rep if sim_p99 > 0])
    tokens = (prep.trace.meta.get("profile") or {}).get("block_tokens")
    planned = planned_bytes(pr)
    io = [r.counters["read_bytes"] + r.counters["write_bytes"] for r in recs]
    tenant = [max(0, r.counters["write_bytes"] - planned["write"]) for r in recs]
    out: dict[str, Any] = {
        "policy": cell.policy, "intents": cell.intents, "reps": len(recs),
        "tpot_p50_us": _d(pct.get(50.0)), "tpot_p99_us": _d(pct.get(99.0)),
        "slo_high": mean_ci([f["slo_high"] for f in per_rep]).as_dict(),
        "slo": mean_ci([f["slo"] for f in per_rep]).as_dict(),
        "goodput_tok_s": mean_ci([f["goodput"] for f in per_rep], floor=0.0).as_dict(),
        "prefill_tokens_recomputed": float(pr.sim.recomputes * tokens) if tokens else None,
        "slow_tier_bytes": mean_ci(io, floor=0.0).as_dict(),
        "replay_slow_bytes": planned["read"] + planned["write"],
        "tenant_write_bytes": mean_ci(tenant, floor=0.0).as_dict(),
        "swap_ins": mean_ci([r.counters["majfaults"] for r in recs], floor=0.0).as_dict(),
        "memcg_failcnt": mean_ci([r.counters["failcnt"] for r in recs], floor=0.0).as_dict(),
        "refaults": mean_ci([r.counters.get("workingset_refault_anon", math.nan) for r in recs],
                            floor=0.0).as_dict(),
        "squeeze_per_rep": [squeeze_row(r) for r in recs],
        "madvised_blocks": float(np.mean([r.madvised_blocks for r in recs])) if recs else None,
        "mm_intent": _mm_intent(recs),
        "seconds": mean_ci([r.seconds for r in recs]).as_dict(),
        "sim_tpot_p50_us": float(np.percentile(sim_t, 50)) if sim_t.size else None,
        "sim_tpot_p99_us": sim_p99, "sim_slo_high": m.get("slo_high"), "sim_goodput_tok_s": m.get("goodput_tok_s"),
        "measured_to_sim_p99": ratio.as_dict(),
        "per_rep": per_rep,
    }
    if swap_in_us is not None and recs and sim_t.size:
        term = swap_in_term_us(recs, len(sim_t), swap_in_us)
        out["swap_in_term_us_per_step"] = term
        out["sim_swap_in_tpot_p99_us"] = sim_p99 + term  # a constant per step moves every percentile by itself
        out["measured_to_sim_swap_in_p99"] = _geo([f["p99_us"] / (sim_p99 + term) for f in per_rep]).as_dict()
    nbytes = int(pr.plan.nbytes.max(initial=0))
    for stat, key in (("median", "calibrated"), ("mean", "calibrated_mean")):
        costs = measured_costs(recs, stat)
        if costs and nbytes:
            cal = calibrated_prediction(prep.trace, cell.policy, prep.tiers, costs, nbytes)
            out[f"{key}_sim_tpot_p99_us"] = cal["tpot_p99_us"]
            out[f"{key}_op_us"] = cal["op_us"]
            out[f"measured_to_{key}_sim_p99"] = _geo([f["p99_us"] / cal["tpot_p99_us"] for f in per_rep
                                                       if cal["tpot_p99_us"] > 0]).as_dict()
    stalls = stall_figures(pr, recs, sim_t)
    if stalls is not None:
        out["stalls"] = stalls
        out["sim_memory_tpot_p99_us"] = stalls["sim_memory_tpot_p99_us"]
        out["measured_to_sim_memory_p99"] = stalls["measured_to_sim_memory_p99"]
    elif recs:
        out["stalls"] = {"reason": next((r.stalls_error for r in recs if r.stalls_error), None)
                         or "no per-step stalls measured (setup.step_stalls says why)"}
    lo, hi = RATIO_BAND
    if math.isfinite(ratio.value) and not lo <= ratio.value <= hi:
        out["missing_cost"] = missing_cost(recs, prep.tiers, nbytes, len(sim_t))
    return out


SQUEEZE_KEYS = ("workingset_refault_anon", "pgscan", "pgsteal", "pgpgout", "failcnt", "io_enomem_retries")


def squeeze_row(r: RepRecord) -> dict[str, Any]:
    """One repetition's squeeze at work: its swap-ins, the squeezed group's reclaim counters, and where the group's
    pages were when the limit was set and at the end."""
    return {"rep": r.rep, "swap_ins": r.counters["majfaults"],
            **{k: r.counters[k] for k in SQUEEZE_KEYS if k in r.counters}, **r.memory,
            **({"beyond_arena": r.memory["at_end"]["beyond_arena"]} if "beyond_arena" in r.memory.get("at_end", {})
               else {}),
            **({"owner_in_group": r.owner_in_group} if r.owner_in_group is not None else {}), **r.kept,
            **({"mm_intent_lookups": r.mm_intent.get("lookups"),
                **{f"mm_intent_{k}": v for k, v in (r.mm_intent.get("reclaim_stats") or {}).items()
                   if k in ("protected_pages", "demoted_pages", "yielded_pages")}} if r.mm_intent else {})}


def _mm_intent(recs: list[RepRecord]) -> dict[str, Any] | None:
    """The registrations of the cell's repetitions (None: the cell registered nothing)."""
    regs = [r.mm_intent for r in recs if r.mm_intent]
    if not regs:
        return None
    steps = max(1, int(np.mean([r.stall_us.size for r in recs if r.mm_intent])))
    return {"updates_per_rep": float(np.mean([g["updates"] for g in regs])),
            "full_updates_per_rep": float(np.mean([g.get("full_updates", g["updates"]) for g in regs])),
            "writes_per_rep": float(np.mean([g.get("writes", 0) for g in regs])),
            "register_ms_per_step": float(np.mean([g.get("register_seconds", 0.0) for g in regs])) * 1e3 / steps,
            "lookups_per_rep": [g.get("lookups") for g in regs],
            "ranges_max": max(g["ranges_max"] for g in regs),
            "ranges_dropped_max": max(g["ranges_dropped_max"] for g in regs),
            "left_after_clear": sum(g["left_after_clear"] for g in regs),
            "errors": [g["error"] for g in regs if g.get("error")],
            "reclaim_stats_last": regs[-1].get("reclaim_stats")}


def _d(e: Estimate | None) -> dict[str, Any] | None:
    return e.as_dict() if e is not None else None


def _geo(ratios: list[float]) -> Estimate:
    """Geometric mean with a t interval on the logs (a ratio of tails is a scale)."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    e = mean_ci(logs)
    f = lambda x: math.exp(x) if math.isfinite(x) else math.nan  # noqa: E731
    return Estimate(f(e.value), f(e.lo), f(e.hi), e.conf, e.reason, e.n)


def _by_rep(cells: dict[str, dict[str, Any]], name: str, key: str) -> dict[int, float]:
    return {i: f[key] for i, f in enumerate(cells[name]["per_rep"])}


def effects(cells: dict[str, dict[str, Any]], grid: list[Cell]) -> dict[str, dict[str, Any]]:
    """Per metric, paired by repetition: the policy's main effect (kvds - baseline, averaged over the mechanism
    levels), the mechanisms' main effect (intents - none, averaged over policies), the interaction (the difference
    of differences) and the whole stack against the reference cell."""
    ln, li, kn, ki = (c.name for c in grid)
    out: dict[str, dict[str, Any]] = {}
    for key, scale, label in (("p99_us", 1e-3, "tpot_p99_ms"), ("slo_high", 100.0, "slo_high_points"),
                              ("goodput", 1.0, "goodput_tok_s")):
        v = {n: _by_rep(cells, n, key) for n in (ln, li, kn, ki)}
        reps = sorted(set.intersection(*(set(d) for d in v.values())))
        a = {n: np.array([v[n][r] for r in reps]) * scale for n in v}
        out[label] = {
            "policy": mean_ci(((a[kn] + a[ki]) - (a[ln] + a[li])) / 2).as_dict(),
            "mechanisms": mean_ci(((a[li] + a[ki]) - (a[ln] + a[kn])) / 2).as_dict(),
            "interaction": mean_ci((a[ki] - a[kn]) - (a[li] - a[ln])).as_dict(),
            "whole_stack": mean_ci(a[ki] - a[ln]).as_dict(),
        }
    return out


def goals(cells: dict[str, dict[str, Any]], grid: list[Cell]) -> dict[str, dict[str, Any]]:
    """The whole stack (kvds's policy with intents) against the baseline policy without intents, paired by
    repetition: TPOT p99 <= 0.6x, high-priority SLO attainment >= +10 points, goodput >= 1.2x."""
    ref, top = grid[0].name, grid[3].name
    r, t = cells[ref]["per_rep"], cells[top]["per_rep"]
    pairs = list(zip(t, r))
    p99 = _geo([a["p99_us"] / b["p99_us"] for a, b in pairs if b["p99_us"] > 0])
    slo = mean_ci([100.0 * (a["slo_high"] - b["slo_high"]) for a, b in pairs])
    good = _geo([a["goodput"] / b["goodput"] for a, b in pairs if b["goodput"] > 0])
    verdicts = {"tpot_p99_ratio": judge_at_most(p99, GOALS["tpot_p99_ratio"], "TPOT p99 ratio "),
                "slo_high_gain_points": judge_at_least(slo, GOALS["slo_high_gain_points"], "high-priority SLO gain "),
                "goodput_ratio": judge_at_least(good, GOALS["goodput_ratio"], "goodput ratio ")}
    return {k: {**v.as_dict(), "line": str(v)} for k, v in verdicts.items()}
