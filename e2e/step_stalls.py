"""Where each decode step's time went, measured rather than modelled: the replay thread's delays (taskstats delay
accounting of that one task: the decode path; the background I/O thread's own waits reach the step only as the
replay's waits for it, which no delay counter holds) read at the start and the end of every decode step. Three of them are costs the simulator has no term for or prices as a constant:
- `reclaim`: the squeezed group's reclaim that kvds's own faults and charges ran (taskstats "freepages": memcg
  reclaim goes through do_try_to_free_pages), including the failed attempts before a fault waits for the guard;
- `swapin`: kvds's reads of reclaimed arena pages (each a zram read, and its decompression);
- `blkio`: every io_schedule wait: the slow tier's O_DIRECT reads and writes (queueing behind the spill tenant
  included) and waits on a page that is locked or under writeback (a swap-in or a pageout in flight);
- `cpu`: time runnable but waiting for a CPU (the run queue: the shared host's other work, measured per step).
Plus the OOM guard's waits that fell inside the step (their times come from the guard, e2e/oom_guard.py): the
sleep of a fault waiting for the guard is in no delay counter, so the guard's own response time is its measured
part.

One query is a raw genetlink round trip (ebpf.taskstats.DelayQuery, about 7-11 us), made outside the timed ops;
the delays of a step's uncharged ops (background submissions, a produce that is not on the decode path) count in
the step too."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

KINDS = ("reclaim", "swapin", "blkio", "cpu")
MEMORY_KINDS = ("reclaim", "swapin")


@dataclass
class StepStalls:
    """One repetition's recorder: begin/end around every step; only decode steps (those whose latency the replay
    records, `dc_steps`) are kept, so the arrays line up with the replay's step latencies. Called from the replay
    thread, whose own delays it reads."""
    query: Callable[[int], dict[str, int] | None]     # a task's delay totals (DelayQuery.task)
    dc_steps: frozenset[int]
    rows: np.ndarray = field(init=False)  # per decode step: t0, t1 (ns), then each of KINDS (ns); allocated and
    # written here, before any squeeze (the replay then allocates nothing per step)
    n: int = 0
    _t0: int = 0
    _d0: dict[str, int] | None = None
    _tid: int = 0

    def __post_init__(self) -> None:
        self.rows = np.full((len(self.dc_steps), 2 + len(KINDS)), -1, dtype=np.int64)

    def begin(self, step: int) -> None:
        if step in self.dc_steps:
            self._tid = threading.get_native_id()
            self._d0 = self.query(self._tid)
            self._t0 = time.monotonic_ns()

    def end(self, step: int) -> None:
        if step not in self.dc_steps or self._d0 is None:
            return
        t1 = time.monotonic_ns()
        d1 = self.query(self._tid)
        if d1 is None:
            raise OSError(f"taskstats has no record of the replay thread (tid {self._tid}) any more")
        d0, self._d0 = self._d0, None
        row = self.rows[self.n]
        row[0], row[1] = self._t0, t1
        for i, k in enumerate(KINDS):
            row[2 + i] = d1[k] - d0[k]
        self.n += 1

    def arrays(self, guard_waits_ns: list[int] | None = None) -> dict[str, np.ndarray]:
        """Per decode step: each delay (us; NaN where the counter moved by more than the step lasted, see
        `glitches`), the step's begin and end (monotonic ns) and, given the guard's wait times, how many of its waits
        fell inside the step."""
        a = self.rows[:self.n]
        out = {k: a[:, 2 + i] / 1e3 for i, k in enumerate(KINDS)}
        out["t0_ns"], out["t1_ns"] = a[:, 0], a[:, 1]
        out["glitches"] = drop_glitches(out, (a[:, 1] - a[:, 0]) / 1e3)
        out["guard_waits"] = waits_per_step(a[:, 0], a[:, 1], guard_waits_ns or [])
        return out


GLITCH_SLACK_US = 1000.0


def drop_glitches(stalls: dict[str, np.ndarray], wall_us: np.ndarray) -> np.ndarray:
    """A delay cannot exceed the step's wall time; a counter that moved by more (seen on this host's 6.18: the
    block I/O delay of one step jumping by 3.2e13 ns, in intent cells) is a kernel accounting glitch, not a
    measurement. Its value becomes NaN; returns, per kind in KINDS order, how many steps were dropped."""
    counts = []
    for k in KINDS:
        bad = ~(stalls[k] <= wall_us + GLITCH_SLACK_US) | (stalls[k] < 0)
        stalls[k] = np.where(bad, np.nan, stalls[k])
        counts.append(int(bad.sum()))
    return np.asarray(counts, dtype=np.int64)


def waits_per_step(t0: np.ndarray, t1: np.ndarray, at_ns: list[int]) -> np.ndarray:
    """How many of the guard's waits (their notification times) fell in each [t0, t1] step."""
    if not len(at_ns) or not t0.size:
        return np.zeros(t0.size, dtype=np.int64)
    at = np.sort(np.asarray(at_ns, dtype=np.int64))
    return (np.searchsorted(at, t1, side="right") - np.searchsorted(at, t0, side="left")).astype(np.int64)


def memory_us(stalls: dict[str, np.ndarray]) -> np.ndarray:
    """Per step, the memory stall the simulator lacks: reclaim + swap-in (us; a dropped glitch counts 0)."""
    return sum((np.nan_to_num(stalls[k]) for k in MEMORY_KINDS), np.zeros_like(stalls["reclaim"]))
