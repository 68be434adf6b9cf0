"""Real operations for replay, on the VM and I/O tracks' own pieces: the fast tier is the VM track's arena
(kernel_vm.arena.Arena, every block faulted in before the replay so hits measure reads, not faults); the slow tier
is a kvds loop device described by the I/O track's Device (io_priority.device), read and written O_DIRECT at slot
offsets by SlotIO, each I/O issued under the ioprio class of its intent.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from harness.ioprio import IoPrio, set_ioprio
from kernel_vm.arena import Arena


def fast_tier(slots: int, slot_bytes: int) -> Arena:
    """`slots` blocks of private anonymous memory, every page written once (pre-faulted), the host's THP as is."""
    arena = Arena(slots * slot_bytes, slot_bytes, thp_off=False)
    arena.populate(np.arange(slots))
    return arena


class SlotIO:
    """O_DIRECT reads and writes at slot offsets of a device (or file), tagged with an ioprio per call."""

    def __init__(self, path: str, slot_bytes: int) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.slot_bytes = slot_bytes
        self._prio = threading.local()

    def _tag(self, prio: IoPrio | None) -> None:
        if prio is not None and getattr(self._prio, "value", None) != prio:
            set_ioprio(prio)  # who=0: the calling thread only
            self._prio.value = prio

    def write(self, buf: memoryview, slot: int, prio: IoPrio | None) -> float:
        """Synchronous O_DIRECT write of `buf` to a slot; returns seconds spent in the call."""
        self._tag(prio)
        t0 = time.perf_counter()
        n = os.pwritev(self.fd, [buf], slot * self.slot_bytes)
        dt = time.perf_counter() - t0
        if n != len(buf):
            raise OSError(f"short O_DIRECT write ({n} of {len(buf)} bytes)")
        return dt

    def read(self, buf: memoryview, slot: int, prio: IoPrio | None) -> float:
        """Synchronous O_DIRECT read of a slot into `buf`; returns seconds spent in the call."""
        self._tag(prio)
        t0 = time.perf_counter()
        n = os.preadv(self.fd, [buf], slot * self.slot_bytes)
        dt = time.perf_counter() - t0
        if n != len(buf):
            raise OSError(f"short O_DIRECT read ({n} of {len(buf)} bytes)")
        return dt

    def close(self) -> None:
        os.close(self.fd)


class Background:
    """One worker thread for prefetches and background spills (its own ioprio per I/O).

    The timed thread waits on a pending future only when it needs the same slot, which is
    exactly when a real engine would stall on an unfinished prefetch or write-back.
    """

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvds-replay-bg")

    def submit(self, fn, *args) -> Future:
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
