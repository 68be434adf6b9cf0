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
    """Measured per-step latencies (us) and per-operation durations (us, in plan order) of one replayed plan."""

    step_latency_us: np.ndarray
    op_dt_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    op_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    waits: int = 0
    compute_idle_us: float = 0.0   # wall time spent idling for the modelled compute between steps

    @property
    def op_us(self) -> dict[str, np.ndarray]:
        """Each operation kind's durations (us), in plan order."""
        return {name: self.op_dt_us[self.op_code == code] for code, name in enumerate(sim.OP_NAMES)}


@dataclass(frozen=True)
class Columns:
    """A plan's columns as Python lists, which the loop indexes per op (a numpy scalar costs several times a list
    item). Built once per plan, not per repetition: for a 2,000-step Mooncake plan they are about 135 MiB of Python
    objects (962,281 ops, measured with tracemalloc), which e2e's repetitions built inside their squeezed memory
    group until 2026-12-03, a transient the group's 50 MiB limit had to reclaim around (swapping the lists
    themselves out and back) on top of the arena's squeeze."""
    step: list[int]
    op: list[int]
    charge: list[int]
    arena: list[int]
    slow: list[int]
    nbytes: list[int]

    @classmethod
    def of(cls, plan: Plan) -> "Columns":
        return cls(plan.step.tolist(), plan.op.tolist(), plan.charge.tolist(), plan.arena.tolist(),
                   plan.slow.tolist(), plan.nbytes.tolist())


@dataclass(frozen=True)
class Timings:
    """Where one replay writes what it measures (one float per op, one per decode step), allocated and written once
    up front, so the loop allocates nothing: a caller that squeezes the replay's memory group (e2e) makes them
    before the squeeze, charged outside it."""
    op: np.ndarray
    step: np.ndarray

    @classmethod
    def of(cls, plan: Plan) -> "Timings":
        return cls(np.full(len(plan), np.nan), np.full(int(np.unique(plan.step).size), np.nan))


def execute(plan: Plan, arena: Arena, dev: SlotIO, bg: Background, io: IoClasses,
            compute_us: float = 0.0, hooks: StepHooks | None = None, cols: Columns | None = None,
            timings: Timings | None = None) -> ReplayRun:
    """Run every op in order; charged ops' wall time (including waits on pending I/O) forms the step latency.

    Between steps the replay idles `compute_us` per elapsed step: the modelled compute, during which the
    simulator lets background I/O (prefetch, background spills) run. Replay cannot run the accelerator, but
    without the idle its background thread would compete with the next step's demand reads for time the
    model gives it (the step latency timed here stays the KV stall; the idle is not charged). `cols` and
    `timings` (Columns.of, Timings.of) made by the caller keep the loop from allocating (e2e makes them outside
    its squeezed group); the returned run's arrays are views of `timings`."""
    pend_arena: dict[int, Future] = {}
    pend_slow: dict[int, Future] = {}
    cols = cols if cols is not None else Columns.of(plan)
    buf = timings if timings is not None else Timings.of(plan)
    dts, lat = buf.op, buf.step
    nlat = 0
    steps, codes_, charges = cols.step, cols.op, cols.charge
    arenas, slows, sizes = cols.arena, cols.slow, cols.nbytes
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
                lat[nlat] = step_us
                nlat += 1
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
        dts[i] = dt
        if charge:
            step_us += dt
            if charge == sim.DC_ACCESS:
                step_dc = True
    if step_dc:
        lat[nlat] = step_us
        nlat += 1
    if hooks is not None and steps:
        hooks.step_end(cur, None)
    for f in list(pend_arena.values()) + list(pend_slow.values()):
        f.result()
    return ReplayRun(lat[:nlat], dts[:len(codes_)], plan.op, waits, idle)
