"""Run the cells: each repetition of each cell in alternating order on the one set-up, with its own squeeze (a fresh
memory cgroup and arena: e2e/stack.py Squeeze) and its spill tenant started for it, the mapping's madvise advice
applied between steps, and progress (steps done, current cell, ETA). Unmeasured warm-up repetitions of the first
cell go before the measured ones."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.progress import progress, say
from harness.stats import alternating_order
from kv_policy import simulator as sim
from kv_policy.replay.execute import Columns, Timings, execute
from kv_policy.replay.slot_io import Background, SlotIO
from e2e.cells import Cell, Prepared
from e2e.mm_register import Registration
from e2e.stack import Stack, beyond_arena, counters, delayacct_on, memory_state
from e2e.step_stalls import StepStalls
from e2e.tenants import Intensity, SpillTenant, writer_argv

PROGRESS_EVERY = 50       # steps between progress updates
TENANT_SECONDS = 3600.0   # the writer's own end; it is ended when its cell repetition ends


@dataclass
class RepRecord:
    """One repetition of one cell, reduced to what the figures need (the per-op lists are not kept)."""
    cell: str
    rep: int
    stall_us: np.ndarray                 # per decode-critical step, the replayed KV stall (us)
    op_median_us: dict[str, float]
    op_p99_us: dict[str, float]
    op_count: dict[str, int]
    waits: int
    counters: dict[str, int]
    seconds: float
    madvised_blocks: int
    writer: list[str] = field(default_factory=list)
    mm_intent: dict[str, Any] | None = None   # what the repetition registered (e2e/mm_register.py), intents only
    op_mean_us: dict[str, float] = field(default_factory=dict)  # each op's mean cost: its tail's weight included
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # the squeezed group's memory_state when its
    # limit was set and at the repetition's end (where the arena's pages were)
    owner_in_group: bool | None = None   # kvds sat in the squeezed group (e2e/stack.py Squeeze says why it matters)
    kept: dict[str, Any] = field(default_factory=dict)  # how it was kept there (e2e/stack.py Keeper.end)
    stalls: dict[str, np.ndarray] = field(default_factory=dict)  # per decode step, where kvds waited
    # (e2e/step_stalls.py: reclaim, swapin, blkio, cpu us; guard_waits); empty when the host cannot say
    stalls_error: str | None = None      # why this repetition's stalls are not to be trusted


class Stopped(Exception):
    """The replay thread was told to stop (kvds is unwinding: a signal, an error)."""


class ReplayThread:
    """The replay runs in a thread created for the repetition, not in kvds's main thread: the kernel gives a task
    a delay-accounting record only if `kernel.task_delayacct` is on when the task is created, and kvds's main thread
    predates the switch (measured on this host: 2,048 swap-ins of the main thread, swap-in delay 0). Create it
    outside the squeezed group (its kernel stack is charged to the group it is created in) and `go` once kvds is
    back in the group; `join` waits for it, and if kvds unwinds meanwhile (SIGINT, SIGTERM) tells it to stop at
    its next step and waits for that before the arena goes."""

    JOIN_AFTER_STOP_S = 120.0

    def __init__(self, fn: Any, driver: Driver) -> None:
        self.fn, self.driver = fn, driver
        self.stop, self.ready, self.done = threading.Event(), threading.Event(), threading.Event()
        driver.stop = self.stop
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="e2e-replay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.ready.wait()
            if not self.stop.is_set():
                self.result = self.fn()
        except BaseException as exc:  # handed to the main thread by join
            self.error = exc
        finally:
            self.done.set()

    def go(self) -> None:
        self.ready.set()

    def join(self) -> Any:
        """The replay's result (its error raised here). Waits on an event, not Thread.join: a Thread.join that a
        signal interrupts can leave CPython believing the thread has ended while it still runs (Python 3.11)."""
        try:
            while not self.done.wait(1.0):
                pass
        except BaseException:
            self.stop.set()
            self.ready.set()
            self.done.wait(self.JOIN_AFTER_STOP_S)
            raise
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


class Driver:
    """The replay's step hooks: the mapping's madvise advice for the slots whose class changed, the due time of the
    next step published for spill scheduler v2, and the progress line."""

    def __init__(self, st: Stack, sched: dict[int, list[tuple[int, np.ndarray]]], step_us: float, tick,
                 reg: Registration | None = None, classes: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
                 stalls: StepStalls | None = None) -> None:
        self.st, self.sched, self.step_us, self.tick = st, sched, step_us, tick
        self.reg, self.classes, self.stalls = reg, classes or {}, stalls
        self.stop: threading.Event | None = None  # set: the replay thread stops at its next step (ReplayThread)
        self.done = 0
        self.madvised = 0
        self.errors: list[str] = []

    def step_begin(self, step: int) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped(f"the replay stopped before step {step}")
        self.st.slack.step_begin()
        if self.stalls is not None:
            self.stalls.begin(step)

    def step_end(self, step: int, next_step: int | None) -> None:
        if self.stalls is not None:
            self.stalls.end(step)
        for advice, slots in self.sched.get(step, ()):
            errs = self.st.arena.madvise(slots, advice)
            self.madvised += int(slots.size)
            if errs and len(self.errors) < 5:
                self.errors += errs[:5 - len(self.errors)]
        if self.reg is not None and step in self.classes:
            self.reg.apply(*self.classes[step])
        gap = (next_step - step) if next_step is not None else 1
        self.st.slack.step_end(time.monotonic_ns() + int(self.step_us * 1e3 * gap))
        self.done += 1
        if self.done % PROGRESS_EVERY == 0:
            self.tick(PROGRESS_EVERY)


def _ops(op_us: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, float], dict[str, int],
                                                dict[str, float]]:
    med, p99, n, mean = {}, {}, {}, {}
    for name, vals in op_us.items():
        if len(vals):
            a = np.asarray(vals)
            med[name], p99[name], n[name] = float(np.median(a)), float(np.percentile(a, 99)), int(a.size)
            mean[name] = float(a.mean())
    return med, p99, n, mean


def run_cells(prep: Prepared, cells: list[Cell], reps: int, st: Stack, it: Intensity, scratch: Path,
              mm_intent: bool = False, warmup: int = 0) -> tuple[list[RepRecord], list[RepRecord],
                                                                list[dict[str, Any]]]:
    """`warmup` unmeasured repetitions of the first cell, then every (repetition, cell) in ABBA order; returns the
    warm-up records, the measured records and the commands started, in run order. `mm_intent`: the intent cells
    also register their slots' classes (the kernel has the registry)."""
    by_name = {c.name: c for c in cells}
    cols = {p: Columns.of(w.plan) for p, w in prep.work.items()}  # once, in kvds's own group (Columns says why)
    order = [(-1 - w, cells[0].name) for w in range(warmup)] + alternating_order([c.name for c in cells], reps)
    steps = prep.steps()
    total = steps * len(order)
    records: list[RepRecord] = []
    commands: list[dict[str, Any]] = []
    t_start = time.monotonic()
    done_steps = 0
    try:
        with progress("e2e", total=total) as bar:
            for k, (rep, name) in enumerate(order):
                label = f"[{k + 1}/{len(order)}] {name} " + (f"rep {rep + 1}/{reps}" if rep >= 0 else
                                                             f"warm-up {-rep}/{warmup} (unmeasured)")

                def tick(n: int, label: str = label) -> None:
                    bar.advance(n)
                    bar.update(description=f"{label}: {_eta(t_start, done_steps + tick.steps, total)}")
                    tick.steps += n
                tick.steps = 0  # type: ignore[attr-defined]
                bar.update(description=f"{label}: {_eta(t_start, done_steps, total)}")
                rec, cmd = _one(prep, by_name[name], rep, st, it, scratch, mm_intent, tick, cols)
                records.append(rec)
                commands.append(cmd)
                bar.advance(steps - tick.steps)  # type: ignore[attr-defined]
                done_steps += steps
                p99_ms = float(np.percentile(rec.stall_us + prep.work[by_name[name].policy].step_us, 99)) / 1e3 \
                    if rec.stall_us.size else float("nan")
                d = rec.counters
                say(f"e2e {label}: {rec.seconds:.1f} s, TPOT p99 (no recompute) {p99_ms:.2f} ms, "
                    f"swap-ins {d['majfaults']}, refaults {d.get('workingset_refault_anon', '-')}, "
                    f"reclaimed {d.get('pgsteal', d.get('pgpgout', '-'))}"
                    + (f", mm_intent lookups {rec.mm_intent['lookups']}" if rec.mm_intent else "")
                    + f", {_eta(t_start, done_steps, total)}")
    finally:
        st.end_squeeze()
    return [r for r in records if r.rep < 0], [r for r in records if r.rep >= 0], commands


def _one(prep: Prepared, cell: Cell, rep: int, st: Stack, it: Intensity, scratch: Path, mm_intent: bool,
         tick: Any, cols: dict[str, Columns]) -> tuple[RepRecord, dict[str, Any]]:
    """One cell repetition on a fresh squeeze: its record and its command line. What the replay writes into
    (Timings, the step stalls) is allocated before the squeeze, so the squeezed group holds the arena and as
    little else as kvds can manage (`beyond_arena` per repetition says how much)."""
    pr = prep.work[cell.policy]
    if st.delays is not None:
        st.delays_on()  # before kvds enters the squeezed group: opening a /proc file charges it there
    timings = Timings.of(pr.plan)
    stalls = StepStalls(st.delays.task, decode_steps(pr.plan)) if st.delays is not None else None
    sq = st.fresh_squeeze()
    argv = writer_argv(st.device.path, st.sizes.replay_bytes, st.sizes.spill_bytes, it, prep.mapping_of(cell),
                       TENANT_SECONDS, scratch, st.shm, max(rep, 0))
    reg = Registration(prep.mapping, st.arena.address, st.sizes.slot_bytes, st.sizes.arena_slots) \
        if mm_intent and cell.intents else None
    driver = Driver(st, prep.schedule[cell.policy] if cell.intents else {}, pr.step_us, tick, reg,
                    prep.classes[cell.policy], stalls)
    bg = Background()   # per repetition: its pending I/O is done before the arena goes
    before, retries = counters(st), SlotIO.enomem_retries
    t0 = time.monotonic()
    with st.outside_squeeze():  # the writer starts in kvds's own group, never in the squeezed one
        tenant = SpillTenant(argv, st.cap)
        bg.submit(int).result()  # and the background thread: its kernel stack is charged there too (a thread
        # started in a full squeezed group fails with ENOMEM when reclaim cannot meet the charge)
        replay = ReplayThread(lambda: execute(pr.plan, st.arena, st.io, bg, prep.io(cell), pr.step_us, driver,
                                              cols[cell.policy], timings), driver)
    try:
        replay.go()
        run = replay.join()
    finally:
        sq.lift()  # the squeeze is over: the tear-down's reads must not meet a full group
        tenant.stop()
        bg.close()
        registered = reg.close() if reg is not None else None
    secs = time.monotonic() - t0
    delta = counters(st).minus(before)
    delta["io_enomem_retries"] = SlotIO.enomem_retries - retries  # O_DIRECT calls that faulted their buffer first
    memory = {"at_limit": sq.at_limit, "at_end": beyond_arena(memory_state(sq.memcg), st.sizes.arena_bytes)}
    kept = st.end_squeeze()
    wait_at, response = kept.pop("wait_at_ns", []), kept.pop("response_ns", [])
    if response:
        kept["guard_response_us_median"] = float(np.median(response)) / 1e3
        kept["guard_response_us_max"] = float(np.max(response)) / 1e3
    med, p99, n, mean = _ops(run.op_us)
    rec = RepRecord(cell.name, rep, run.step_latency_us, med, p99, n, run.waits, delta, secs, driver.madvised,
                    tenant.argv, registered, mean, memory, sq.owner_in_group, kept)
    if stalls is not None:
        rec.stalls = stalls.arrays(wait_at)
        if not delayacct_on():
            rec.stalls_error = "kernel.task_delayacct was switched off during the repetition (by another process)"
        elif rec.stalls["reclaim"].size != run.step_latency_us.size:
            rec.stalls_error = (f"{rec.stalls['reclaim'].size} steps' stalls for {run.step_latency_us.size} decode "
                                "steps")
    cmd = {"cell": cell.name, "rep": rep, "writer": tenant.argv, "memory_limit_bytes": sq.limit_bytes,
           **({"madvise_errors": driver.errors} if driver.errors else {})}
    return rec, cmd


def decode_steps(plan: Any) -> frozenset[int]:
    """The steps whose latency the replay records (kv_policy/replay/execute.py: a step with a decode-critical
    access), so per-step stalls line up with the step latencies."""
    return frozenset(np.unique(plan.step[plan.charge == sim.DC_ACCESS]).tolist())


def _eta(t0: float, done: int, total: int) -> str:
    if done <= 0:
        return f"0/{total} steps"
    left = (time.monotonic() - t0) / done * (total - done)
    return f"{done}/{total} steps, ETA {int(left // 60)}:{int(left % 60):02d}"
