"""`kvds policy replay`: execute each policy's simulated decisions as real memory and block I/O, and
put the measured decode-step latencies next to the simulated ones.

Fast tier: an anonymous arena charged to a kvds memory cgroup whose limit is the arena plus
a margin. Slow tier: a loop device (direct I/O) over a kvds scratch file. Misses are
synchronous O_DIRECT reads at the mapping's decode-critical read class; spills are O_DIRECT
writes at the cold-spillable write class; prefetches are O_DIRECT reads at the prefetch-soon
read class on a background thread. All kernel-state changes go through harness.knobs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import knobs
from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import load_mapping
from kv_policy.compare import Capacity, build
from kv_policy.metrics import run_metrics
from kv_policy.replay.execute import IoClasses, ReplayRun, execute
from kv_policy.replay.fit import fit_tiers
from kv_policy.replay.slot_io import Background, SlotIO, fast_tier
from kv_policy.replay.plan import Plan, make_plan
from kv_policy.simulator import SimResult, simulate
from kv_policy.tiers import Tier, TierModel, for_trace
from kv_policy.trace import Trace
from harness.progress import progress
from harness.stats import Estimate, alternating_order, mean_ci
from io_priority.device import Device, Layout
from kernel_vm.arena import Arena

MEMCG_MARGIN = 256 << 20      # interpreter, numpy and op logs on top of the arena
MAX_BACKING = 16 << 30        # refuse slow tiers larger than this (use --max-steps)


@dataclass
class PolicyReplay:
    """One policy: its simulation, its plan, and the measured runs (one per repetition)."""

    sim: SimResult
    plan: Plan
    runs: list[ReplayRun]
    step_us: float = 0.0   # modelled compute per step: added to replayed stalls before the TPOT check
    recompute_us: np.ndarray | None = None  # per decode step, modelled recompute time (replay cannot run it)


def truncate(trace: Trace, max_steps: int | None) -> Trace:
    """The events of the first `max_steps` distinct steps (the whole trace when None)."""
    if not max_steps or len(trace) == 0:
        return trace
    steps = np.unique(trace.step)
    if steps.size <= max_steps:
        return trace
    n = int(np.searchsorted(trace.step, steps[max_steps], side="left"))
    return Trace(trace.step[:n], trace.kind[:n], trace.block[:n], trace.critical[:n], trace.cls[:n],
                 trace.block_size, trace.block_request, trace.block_priority, trace.block_deadline_us,
                 dict(trace.meta, truncated_to_steps=max_steps))


def io_classes(mapping_name: str) -> IoClasses:
    m = load_mapping(mapping_name)
    return IoClasses(m.for_class(IntentClass.DECODE_CRITICAL).read_ioprio,
                     m.for_class(IntentClass.COLD_SPILLABLE).write_ioprio,
                     m.for_class(IntentClass.PREFETCH_SOON).read_ioprio)


def plan_all(trace: Trace, policies: list[str], cap: Capacity, fast: Tier, slow: Tier) -> dict[str, PolicyReplay]:
    """Simulate every policy with the op log recorded and turn each log into a slot plan."""
    tiers = for_trace(trace, fast, slow, cap.for_trace(trace))
    out = {}
    for name in policies:
        res = simulate(trace, build(name), tiers, record=True)
        out[name] = PolicyReplay(res, make_plan(res.ops, trace.block_size), [], tiers.step_us,
                                 recompute_per_step(res, trace, tiers))
    return out


def recompute_per_step(res: SimResult, trace: Trace, tiers: TierModel) -> np.ndarray:
    """Per decode step (the steps replay times), the modelled recompute time of the recomputes charged to it:
    replay produces a recomputed block in the arena but cannot run the accelerator's prefill."""
    ops = res.ops
    from kv_policy import simulator as sim

    dc_steps = np.unique(ops["step"][ops["charge"] == sim.DC_ACCESS])
    out = np.zeros(dc_steps.size)
    sel = (ops["op"] == sim.OP_RECOMPUTE) & (ops["charge"] != sim.BACKGROUND)
    if sel.any() and np.isfinite(tiers.recompute_us_per_byte):
        idx = np.searchsorted(dc_steps, ops["step"][sel])
        ok = (idx < dc_steps.size) & (dc_steps[np.minimum(idx, dc_steps.size - 1)] == ops["step"][sel])
        cost = trace.block_size[ops["block"][sel]] * tiers.recompute_us_per_byte
        np.add.at(out, idx[ok], cost[ok])
    return out


@dataclass
class Setup:
    """The real fast and slow tiers for one replay session."""

    arena: Arena          # the VM track's arena, pre-faulted (slot_io.fast_tier)
    dev: SlotIO           # O_DIRECT slot I/O on `device`
    device: Device        # the I/O track's description of the slow tier: a kvds loop device over a scratch file
    cgroup: knobs.Cgroup
    limit_file: str
    scheduler: str

    @property
    def device_path(self) -> str:
        return self.device.path


def setup(work: dict[str, PolicyReplay], target_dir: Path, scheduler: str) -> Setup:
    """Create the backing file, loop device, memory cgroup and arena sized for the largest plan."""
    slot = max(r.plan.slot_bytes for r in work.values())
    arena_slots = max(r.plan.arena_slots for r in work.values())
    slow_slots = max(r.plan.slow_slots for r in work.values())
    backing_bytes = slow_slots * slot
    if backing_bytes > MAX_BACKING:
        raise UserError(f"the slow tier would need {backing_bytes >> 20} MiB; replay fewer steps (--max-steps)")
    backing = knobs.create_file(target_dir / f"kvds-replay-{os.getpid()}.img", backing_bytes, fill=b"\xa5")
    dev_path = knobs.loop_attach(backing, direct_io=True)
    sched = scheduler
    if scheduler != "keep":
        knobs.set_scheduler(dev_path, scheduler)
    else:
        sched = knobs.scheduler_of(dev_path)
    cg = knobs.create_cgroup("replay", ("memory",))
    limit_file = "memory.limit_in_bytes" if cg.version("memory") == 1 else "memory.max"
    cg.set("memory", limit_file, arena_slots * slot + MEMCG_MARGIN)
    cg.add_pid(os.getpid())
    device = Device(dev_path, "kvds-loop", str(backing), Layout(kv_bytes=backing_bytes, spill_bytes=0))
    return Setup(fast_tier(arena_slots, slot), SlotIO(dev_path, slot), device, cg, limit_file, sched)


def run_replay(work: dict[str, PolicyReplay], st: Setup, io: IoClasses, reps: int) -> None:
    """Execute every policy's plan `reps` times in alternating (ABBA) order."""
    bg = Background()
    try:
        with progress("replaying", total=reps * len(work)) as bar:
            for _, name in alternating_order(list(work), reps):
                work[name].runs.append(execute(work[name].plan, st.arena, st.dev, bg, io, work[name].step_us))
                bar.advance(1)
    finally:
        bg.close()


def memcg_report(st: Setup) -> dict[str, int | str]:
    """What the cgroup saw: its limit, peak usage and how often the limit was hit."""
    out: dict[str, int | str] = {"limit_bytes": int(st.cgroup.get("memory", st.limit_file).strip() or 0)}
    for key, fname in (("max_usage_bytes", "memory.max_usage_in_bytes"), ("failcnt", "memory.failcnt"),
                       ("peak_bytes", "memory.peak")):
        try:
            out[key] = int(st.cgroup.get("memory", fname).strip())
        except (OSError, ValueError):
            continue
    return out


def refit(work: dict[str, PolicyReplay], trace: Trace, cap: Capacity, fast: Tier,
          slow: Tier) -> tuple[Tier, Tier, dict[str, SimResult]]:
    """Tiers fitted to all policies' measured op times, and every policy re-simulated with them."""
    runs = [r for pr in work.values() for r in pr.runs]
    nbytes = int(np.median(trace.block_size))
    ffast, fslow = fit_tiers(runs, nbytes, fast, slow)
    tiers = for_trace(trace, ffast, fslow, cap.for_trace(trace))
    return ffast, fslow, {name: simulate(trace, build(name), tiers) for name in work}


def _q(a: np.ndarray, p: float) -> float:
    return float(np.percentile(a, p)) if a.size else float("nan")


def slo(pr: PolicyReplay, stall_us: np.ndarray) -> float:
    """Share of request-steps within their TPOT deadline when each decode step stalls `stall_us` (plus compute)."""
    res = pr.sim
    if not res.rs_step.size or stall_us.size != res.step_latency_us.size:
        return float("nan")
    return float(np.mean(stall_us[res.rs_step] + pr.step_us <= res.rs_deadline_us))


def side_by_side(pr: PolicyReplay) -> dict[str, float | Estimate]:
    """Simulated vs replayed KV stall p99 and SLO attainment; replayed figures as t-intervals over repetitions
    (each repetition one p99 and one attainment), and the ratio replayed / simulated. A replayed stall is the
    measured one plus the modelled recompute time of its step (replay cannot run the accelerator)."""
    sim_stall = pr.sim.step_latency_us - pr.step_us
    sim_p99 = _q(sim_stall, 99)
    extra = pr.recompute_us if pr.recompute_us is not None else 0.0
    reps = [r.step_latency_us + extra for r in pr.runs if r.step_latency_us.size]
    real_p99 = mean_ci([_q(r, 99) for r in reps])
    real_slo = mean_ci([slo(pr, r) for r in reps])
    ratio = mean_ci([_q(r, 99) / sim_p99 for r in reps]) if sim_p99 > 0 else Estimate(np.nan, np.nan, np.nan)
    return {"sim_stall_p99_us": sim_p99, "real_stall_p99_us": real_p99, "p99_ratio_real_to_sim": ratio,
            "sim_slo": slo(pr, sim_stall), "real_slo": real_slo, "step_us": pr.step_us,
            "real_stall_p99_by_rep_us": [_q(r, 99) for r in reps]}


def versus(rows: dict[str, dict], base: str = "LRU") -> dict[str, dict[str, Estimate]]:
    """Per policy, its replayed stall p99 against `base`'s, paired by repetition (runs alternate ABBA, so
    repetition k of both ran side by side): the difference (t-interval over repetitions) and the ratio (the
    geometric mean, t-interval on the logs: a p99 is a scale, and one stalled repetition should not swamp it)."""
    if base not in rows:
        return {}
    ref = rows[base]["real_stall_p99_by_rep_us"]
    out = {}
    for name, r in rows.items():
        if name == base:
            continue
        pairs = list(zip(r["real_stall_p99_by_rep_us"], ref))
        logs = mean_ci([float(np.log(a / b)) for a, b in pairs if a > 0 and b > 0])
        out[name] = {"difference_us": mean_ci([a - b for a, b in pairs]),
                     "ratio": Estimate(float(np.exp(logs.value)), float(np.exp(logs.lo)), float(np.exp(logs.hi)))}
    return out


def summary_row(pr: PolicyReplay, fitted: SimResult | None = None) -> dict:
    """Simulated (default and host-fitted tiers) next to measured figures for one policy. Step figures here are
    KV stalls (what replay executes): the modelled compute time is left out of both sides."""
    sim_m = run_metrics(pr.sim)
    stall = pr.sim.step_latency_us - pr.step_us
    fit = fitted.step_latency_us - pr.step_us if fitted is not None else np.zeros(0)
    real = np.concatenate([r.step_latency_us for r in pr.runs]) if pr.runs else np.zeros(0)
    ops = lambda op: np.concatenate([np.asarray(r.op_us[op]) for r in pr.runs]) if pr.runs else np.zeros(0)  # noqa: E731
    row = {"dc_accesses": sim_m["dc_accesses"], "dc_misses": sim_m["dc_misses"],
           "dc_miss_ratio": sim_m["dc_miss_ratio"], "sim_p50_us": _q(stall, 50),
           "sim_p99_us": _q(stall, 99), "fit_p50_us": _q(fit, 50), "fit_p99_us": _q(fit, 99),
           "real_p50_us": _q(real, 50), "real_p99_us": _q(real, 99),
           "spills": sim_m["spills"], "prefetches": sim_m["prefetches"],
           "miss_read_p50_us": _q(ops("miss"), 50), "hit_read_p50_us": _q(ops("hit"), 50),
           "spill_write_p50_us": _q(ops("spill-sync"), 50),
           "waits_on_background": float(sum(r.waits for r in pr.runs))}
    for k, v in side_by_side(pr).items():
        row[k] = v.as_dict() if isinstance(v, Estimate) else v
    return row
