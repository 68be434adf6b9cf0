"""Bound a limit write that the kernel may never finish: an interval timer interrupts it.

A `memory.max` write below what reclaim can free loops in the writer's own context (`memory_max_write()`):
reclaim, then the memcg OOM killer, until the usage fits; after a kill it waits for the victim to exit. Once
reclaim has given up, nothing in that loop reschedules on vanilla 6.8; Debian's 6.12 tree has a
`cond_resched()` in `mem_cgroup_scan_tasks()`, which the OOM killer calls on every pass. So on one CPU without
kernel preemption (the guest lab's `PREEMPT_NONE`, one vCPU) a 6.8 victim never runs and the write never
returns: the guest hangs. The loop does check
`signal_pending()` on every pass, so a SIGALRM from an interval timer (delivered from the timer interrupt)
ends it: the write returns success, the limit stays set, and the victim gets the CPU to die. The caller
records that the bound fired, so a stall is a finding, not a silent change of the experiment.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass
class Bound:
    """What happened to the bounded block: how long it took and whether the timer interrupted it."""
    seconds: float = 0.0
    interrupted: bool = False


@contextmanager
def interrupt_after(seconds: float) -> Iterator[Bound]:
    """Deliver SIGALRM to this process `seconds` after entering (ITIMER_REAL; main thread only) and note it;
    the timer and the previous handler are restored on exit, also on error."""
    out = Bound()

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        out.interrupted = True

    old = signal.signal(signal.SIGALRM, on_alarm)
    t0 = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield out
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        out.seconds = time.monotonic() - t0
