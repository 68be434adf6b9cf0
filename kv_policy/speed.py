"""Simulator speed: events per second on a generated trace, and cost per event as live blocks grow."""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kv_policy.generator import generate
from kv_policy.registry import make_policy
from kv_policy.profiles import get_profile
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from kv_policy.trace import Trace
from harness.progress import progress

SCALING_EVENTS = 200_000
TARGET_EVENTS_PER_S = 100_000  # issue 14: the simulator keeps this rate with the scheduler-aware policy
SCALING_ACTIVE = (8, 64, 512)  # max_active requests -> roughly proportional live blocks
SCALING_LONG = "long_context_extreme"  # plus one trace with tens of thousands of live blocks


def _time_sim(trace: Trace, policy: str, fraction: float, repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (this process) of `repeat` simulations.

    CPU time is the one-core figure on a shared host; wall time includes waiting for a core.
    """
    tiers = for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, max(int(trace.block_size.max()),
                                                             int(trace.peak_live_bytes() * fraction)))
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(trace, make_policy(policy), tiers)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def _peak_live_blocks(trace: Trace) -> int:
    return int(trace.peak_live_bytes() // int(trace.block_size.max()))


@dataclass(frozen=True)
class SpeedConfig:
    events: int = 1_000_000  # trace length
    policy: str = "ExpectedNextUse"
    profile: str = "balanced"
    fast_fraction: float = 0.5
    repeat: int = 3          # timed repetitions (the median is reported)


RATE = {"unit": "events/s"}  # a rate: the name's "_s" suffix is not seconds here


@dataclass(frozen=True)
class SpeedSummary:
    """`kvds policy speed`'s figures (it files no run; the verb was `bench` before issue 17)."""
    policy: str                     # the policy simulated
    profile: str                    # the workload profile generated
    events: int                     # events in the generated trace
    blocks: int                     # KV blocks in the trace
    peak_live_blocks: int           # most blocks alive at once
    generate_cpu_s: float           # CPU time to generate the trace
    simulate_wall_s: float          # median wall time of one simulation
    simulate_cpu_s: float           # median CPU time of one simulation
    events_per_s: float = field(metadata=RATE)         # events per CPU second on one core
    events_per_wall_s: float = field(metadata=RATE)    # events per wall second
    repeat: int                     # timed repetitions
    scaling: list[dict[str, Any]]   # per trace: max_active, peak_live_blocks, ns_per_event (CPU time)
    target_events_per_s: int = field(metadata=RATE)    # issue 14's rate
    meets_target: bool              # events_per_s >= target_events_per_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def speed(cfg: SpeedConfig) -> SpeedSummary:
    """Generate `events` events, time the simulator (median of `repeat`), then a live-block scaling series."""
    events, policy, profile, fraction, repeat = cfg.events, cfg.policy, cfg.profile, cfg.fast_fraction, cfg.repeat
    make_policy(policy)
    c0 = time.process_time()
    trace = generate(get_profile(profile), 0, events)
    gen_cpu_s = time.process_time() - c0
    with progress(f"speed {policy}", total=repeat + len(SCALING_ACTIVE) + 1) as bar:
        sim_s, sim_cpu_s = _time_sim(trace, policy, fraction, repeat)
        bar.advance(repeat)
        scaling = []
        for active in SCALING_ACTIVE:
            prof = get_profile(profile, max_active=active, batch=max(1, active // 2),
                               arrivals_per_step=float(active))
            t = generate(prof, 0, SCALING_EVENTS)
            _, cpu = _time_sim(t, policy, fraction, 1)
            scaling.append({"max_active": active, "peak_live_blocks": _peak_live_blocks(t),
                            "ns_per_event": cpu / len(t) * 1e9})
            bar.advance(1)
        t = generate(get_profile(SCALING_LONG), 0, SCALING_EVENTS)
        _, cpu = _time_sim(t, policy, fraction, 1)
        scaling.append({"max_active": get_profile(SCALING_LONG).max_active, "profile": SCALING_LONG,
                        "peak_live_blocks": _peak_live_blocks(t), "ns_per_event": cpu / len(t) * 1e9})
        bar.advance(1)
    return SpeedSummary(policy=make_policy(policy).name, profile=profile, events=len(trace), blocks=trace.n_blocks,
                        peak_live_blocks=_peak_live_blocks(trace), generate_cpu_s=gen_cpu_s, simulate_wall_s=sim_s,
                        simulate_cpu_s=sim_cpu_s, events_per_s=len(trace) / sim_cpu_s,
                        events_per_wall_s=len(trace) / sim_s, repeat=repeat, scaling=scaling,
                        target_events_per_s=TARGET_EVENTS_PER_S,
                        meets_target=len(trace) / sim_cpu_s >= TARGET_EVENTS_PER_S)
