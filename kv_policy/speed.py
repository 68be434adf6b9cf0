"""Simulator speed: events per second on a generated trace, and cost per event as live blocks grow; beside them,
several policies on the same trace, and libCacheSim's requests per second on the trace's accessed-block sequence
(the same blocks, in the same order, at the fast tier's capacity in blocks), measured in the same run."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kv_policy import codes
from kv_policy.crosscheck_run import MIN_BLOCKS
from kv_policy.generator import generate
from kv_policy.sequence import libcachesim_runner
from kv_policy.registry import make_policy
from kv_policy.profiles import get_profile
from kv_policy.simulator import compiled, simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel, for_trace
from kv_policy.trace import Trace
from harness.progress import progress
from harness.results import StoredSummary

SCALING_EVENTS = 200_000
TARGET_EVENTS_PER_S = 100_000  # the simulator's floor for any other policy
TARGET_LRU_CLASS = 1_000_000   # real traces: LRU-class rows (LRU, the offline bounds, the engine rows)
TARGET_SCHEDULER_AWARE = 500_000  # real traces: kvds's scheduler-aware policies
SIDE_BY_SIDE = ("LRU", "MIN", "vLLM-prefix", "SGLang-priority", "ExpectedNextUse", "DeadlineAware")
LCS_ALGORITHMS = ("LRU", "ARC", "S3-FIFO", "MIN")
SCALING_ACTIVE = (8, 64, 512)  # max_active requests -> roughly proportional live blocks
SCALING_LONG = "long_context_extreme"  # plus one trace with tens of thousands of live blocks


def _tiers(trace: Trace, fraction: float) -> TierModel:
    return for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, max(int(trace.block_size.max()),
                                                           int(trace.peak_live_bytes() * fraction)))


def _time_sim(trace: Trace, policy: str, fraction: float, repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (this process) of `repeat` simulations.

    CPU time is the one-core figure on a shared host; wall time includes waiting for a core.
    """
    tiers = _tiers(trace, fraction)
    if compiled(make_policy(policy), trace):  # load the compiled loop before timing it
        small = generate(get_profile("balanced"), 0, 2_000)
        simulate(small, make_policy(policy), _tiers(small, fraction))
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        simulate(trace, make_policy(policy), tiers)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def _peak_live_blocks(trace: Trace) -> int:
    return int(trace.peak_live_bytes() // int(trace.block_size.max()))



RATE = {"unit": "events/s"}  # a rate: the name's "_s" suffix is not seconds here


def target_of(policy: str) -> int:
    """The events/s a row should reach on 2 cores: LRU-class rows 1M, kvds's scheduler-aware policies 500k."""
    from kv_policy.registry import engine_of, is_reference

    name = make_policy(policy).name
    if name in ("ExpectedNextUse", "DeadlineAware"):
        return TARGET_SCHEDULER_AWARE
    return TARGET_LRU_CLASS if name == "LRU" or is_reference(name) or engine_of(name) else TARGET_EVENTS_PER_S


@dataclass(frozen=True)
class SpeedSummary(StoredSummary):
    """`kvds policy speed`'s figures (it files no run; `bench` is the verb's earlier name)."""
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
    target_events_per_s: int = field(metadata=RATE)    # the rate this policy's row must reach
    meets_target: bool              # events_per_s >= target_events_per_s
    side_by_side: list[dict[str, Any]] | None = None   # per policy on the same trace: events_per_s (CPU),
    #                                 events_per_wall_s, compiled (the compiled loop ran it), target, meets_target
    sequence_requests: int | None = None          # accessed blocks of the trace: libCacheSim's requests
    sequence_capacity_blocks: int | None = None   # the fast tier in blocks (libCacheSim's cache size)
    libcachesim: list[dict[str, Any]] | None = None  # per algorithm: requests_per_s (CPU), requests_per_wall_s,
    #                                 hit_ratio, on that sequence
    libcachesim_version: str | None = None         # the `libcachesim` package the rows above ran

    OMIT_WHEN_NONE = ("side_by_side", "sequence_requests", "sequence_capacity_blocks", "libcachesim",
                      "libcachesim_version")


def speed(cfg: Any) -> SpeedSummary:  # cfg: kv_policy.speed_run.SpeedConfig (which imports this module)
    """Generate `events` events, time the simulator (median of `repeat`), then a live-block scaling series."""
    events, policy, profile, fraction, repeat = cfg.events, cfg.policy, cfg.profile, cfg.fast_fraction, cfg.repeat
    make_policy(policy)
    c0 = time.process_time()
    trace = generate(get_profile(profile), 0, events)
    gen_cpu_s = time.process_time() - c0
    with progress(f"speed {policy}", total=repeat + len(SCALING_ACTIVE) + 2 + len(cfg.side_by_side)) as bar:
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
        side = []
        for name in cfg.side_by_side:
            wall_s, cpu_s = (sim_s, sim_cpu_s) if name == policy else _time_sim(trace, name, fraction, repeat)
            rate = len(trace) / cpu_s
            side.append({"policy": make_policy(name).name, "events_per_s": rate,
                         "events_per_wall_s": len(trace) / wall_s,
                         "compiled": compiled(make_policy(name), trace), "target": target_of(name),
                         "meets_target": rate >= target_of(name)})
            bar.advance(1)
        seq, cap_blocks, lcs = _libcachesim(trace, fraction)
        bar.advance(1)
    return SpeedSummary(policy=make_policy(policy).name, profile=profile, events=len(trace), blocks=trace.n_blocks,
                        peak_live_blocks=_peak_live_blocks(trace), generate_cpu_s=gen_cpu_s, simulate_wall_s=sim_s,
                        simulate_cpu_s=sim_cpu_s, events_per_s=len(trace) / sim_cpu_s,
                        events_per_wall_s=len(trace) / sim_s, repeat=repeat, scaling=scaling,
                        target_events_per_s=target_of(policy),
                        meets_target=len(trace) / sim_cpu_s >= target_of(policy), side_by_side=side,
                        sequence_requests=seq, sequence_capacity_blocks=cap_blocks, libcachesim=lcs,
                        libcachesim_version=libcachesim_runner.version())


def _libcachesim(trace: Trace, fraction: float) -> tuple[int, int, list[dict[str, Any]]]:
    """libCacheSim on the trace's accessed blocks, in event order, with the fast tier's capacity in blocks."""
    blocks = trace.block[trace.kind == codes.ACCESS].astype(np.int64)
    cap = _tiers(trace, fraction).fast_capacity // int(trace.block_size.max())
    rows = []
    with libcachesim_runner.OracleTrace(blocks) as t:
        for name in LCS_ALGORITHMS:
            if name == "S3-FIFO" and cap < MIN_BLOCKS:
                continue  # libCacheSim's S3-FIFO aborts the process below a 2-block small FIFO
            out = t.run(name, int(cap))
            rows.append({"algorithm": name, "requests_per_s": out.requests_per_cpu_s,
                         "requests_per_wall_s": out.requests_per_s, "hit_ratio": out.hit_ratio})
    return len(blocks), int(cap), rows
