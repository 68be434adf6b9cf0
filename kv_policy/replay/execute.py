"""Execute one replay plan against a real arena and device, timing what a decode step waits for."""
from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from harness.ioprio import IoPrio
from kv_policy import simulator as sim
from kv_policy.replay.slot_io import Background, SlotIO
from kernel_vm.arena import Arena
from kv_policy.replay.plan import Plan


@dataclass(frozen=True)
class IoClasses:
    """ioprio per operation kind, taken from the mapping's intent classes."""

    critical_read: IoPrio | None   # decode-critical read_ioprio: a miss
    spill_write: IoPrio | None     # cold-spillable write_ioprio: every spill
    prefetch_read: IoPrio | None   # prefetch-soon read_ioprio: a prefetch


class StepHooks(Protocol):
    """Called between decode steps, outside the timed ops (the end-to-end experiment, e2e/, publishes the next
    step's due time for the spill scheduler and applies the mapping's madvise advice here)."""

    def step_begin(self, step: int) -> None: ...

    def step_end(self, step: int, next_step: int | None) -> None: ...


@dataclass
class ReplayRun:
    """Measured per-step latencies (us) and per-operation durations (us) of one replayed plan."""

    step_latency_us: np.ndarray
    op_us: dict[str, list[float]] = field(default_factory=dict)
    waits: int = 0
    compute_idle_us: float = 0.0   # wall time spent idling for the modelled compute between steps


def execute(plan: Plan, arena: Arena, dev: SlotIO, bg: Background, io: IoClasses,
            compute_us: float = 0.0, hooks: StepHooks | None = None) -> ReplayRun:
    """Run every op in order; charged ops' wall time (including waits on pending I/O) forms the step latency.

    Between steps the replay idles `compute_us` per elapsed step: the modelled compute, during which the
    simulator lets background I/O (prefetch, background spills) run. Replay cannot run the accelerator, but
    without the idle its background thread would compete with the next step's demand reads for time the
    model gives it (the step latency timed here stays the KV stall; the idle is not charged)."""
    pend_arena: dict[int, Future] = {}
    pend_slow: dict[int, Future] = {}
    op_us: dict[str, list[float]] = {name: [] for name in sim.OP_NAMES}
    lat: list[float] = []
    steps, codes_, charges = plan.step.tolist(), plan.op.tolist(), plan.charge.tolist()
    arenas, slows, sizes = plan.arena.tolist(), plan.slow.tolist(), plan.nbytes.tolist()
    waits = 0
    cur = steps[0] if steps else 0
    step_us, step_dc = 0.0, False

    def wait(table: dict[int, Future], slot: int) -> None:
        nonlocal waits
        f = table.pop(slot, None)
        if f is not None:
            if not f.done():
                waits += 1
            f.result()

    def bg_write(a: int, s: int, n: int) -> None:
        dev.write(arena.slot(a, n), s, io.spill_write)

    def bg_read(a: int, s: int, n: int) -> None:
        dev.read(arena.slot(a, n), s, io.prefetch_read)

    idle = 0.0
    if hooks is not None and steps:
        hooks.step_begin(cur)
    for i in range(len(codes_)):
        if steps[i] != cur:
            if step_dc:
                lat.append(step_us)
            if hooks is not None:
                hooks.step_end(cur, steps[i])
            if compute_us > 0.0:
                t0 = time.perf_counter()
                time.sleep(compute_us * (steps[i] - cur) / 1e6)
                idle += (time.perf_counter() - t0) * 1e6
            cur, step_us, step_dc = steps[i], 0.0, False
            if hooks is not None:
                hooks.step_begin(cur)
        c, a, s, n, charge = codes_[i], arenas[i], slows[i], sizes[i], charges[i]
        t0 = time.perf_counter()
        if c == sim.OP_HIT:
            wait(pend_arena, a)
            arena.read(a, n)
        elif c == sim.OP_MISS:
            wait(pend_arena, a)
            wait(pend_slow, s)
            dev.read(arena.slot(a, n), s, io.critical_read)
        elif c == sim.OP_SPILL_SYNC:
            wait(pend_arena, a)
            wait(pend_slow, s)
            dev.write(arena.slot(a, n), s, io.spill_write)
        elif c == sim.OP_SPILL_BG:
            wait(pend_arena, a)
            wait(pend_slow, s)
            f = bg.submit(bg_write, a, s, n)
            pend_arena[a] = f
            pend_slow[s] = f
        elif c == sim.OP_PREFETCH:
            wait(pend_arena, a)
            wait(pend_slow, s)
            f = bg.submit(bg_read, a, s, n)
            pend_arena[a] = f
            pend_slow[s] = f
        elif c in (sim.OP_ALLOC, sim.OP_RECOMPUTE):  # recompute: the block is produced again
            wait(pend_arena, a)
            arena.produce(a, n, i)
        dt = (time.perf_counter() - t0) * 1e6
        op_us[sim.OP_NAMES[c]].append(dt)
        if charge:
            step_us += dt
            if charge == sim.DC_ACCESS:
                step_dc = True
    if step_dc:
        lat.append(step_us)
    if hooks is not None and steps:
        hooks.step_end(cur, None)
    for f in list(pend_arena.values()) + list(pend_slow.values()):
        f.result()
    return ReplayRun(np.asarray(lat, dtype=np.float64), op_us, waits, idle)
