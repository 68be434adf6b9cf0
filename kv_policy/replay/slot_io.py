"""Real operations for replay, on the VM and I/O tracks' own pieces: the fast tier is the VM track's arena
(kernel_vm.arena.Arena, every block faulted in before the replay so hits measure reads, not faults); the slow tier
is a kvds loop device described by the I/O track's Device (io_priority.device), read and written O_DIRECT at slot
offsets by SlotIO, each I/O issued under the ioprio class of its intent.
"""
from __future__ import annotations

import errno
import mmap
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from harness.ioprio import IoPrio, set_ioprio
from kernel_vm.arena import Arena


def fast_tier(slots: int, slot_bytes: int) -> Arena:
    """`slots` blocks of private anonymous memory, every page written once (pre-faulted), the host's THP as is."""
    arena = Arena(slots * slot_bytes, slot_bytes, thp_off=False)
    arena.populate(np.arange(slots))
    return arena


IO_ATTEMPTS = 4   # O_DIRECT calls per transfer when the squeeze keeps the buffer from being pinned (SlotIO._io)


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

    enomem_retries = 0
    """Calls retried after the kernel could not fault the buffer in for the I/O (see _io)."""

    def _io(self, call: Any, buf: memoryview, offset: int) -> int:
        """One O_DIRECT call. The kernel pins the buffer's pages for it and faults in those reclaim took; charging
        them to a memory cgroup at its limit fails there where a page fault from user space would reclaim or wait
        (e2e's squeezed arena): with ENOMEM, or with a short transfer up to the first page it could not charge.
        Then the pages are faulted in from here and the call made again, inside the caller's timing: the cost is
        the fault-in the squeeze causes. Reclaim may take a page again between the fault-in and the pin, so a few
        times; what the last attempt returns (or raises) is the caller's."""
        for attempt in range(IO_ATTEMPTS):
            last = attempt == IO_ATTEMPTS - 1
            try:
                n = call(self.fd, [buf], offset)
            except OSError as exc:
                if exc.errno != errno.ENOMEM or last:
                    raise
                n = -1
            if n == len(buf) or last:
                return n
            SlotIO.enomem_retries += 1
            flat = buf.cast("B")
            for off in range(0, len(flat), mmap.PAGESIZE):
                flat[off] = flat[off]  # a write fault: the page is present and charged before the pin
        raise AssertionError("unreachable")

    def write(self, buf: memoryview, slot: int, prio: IoPrio | None) -> float:
        """Synchronous O_DIRECT write of `buf` to a slot; returns seconds spent in the call."""
        self._tag(prio)
        t0 = time.perf_counter()
        n = self._io(os.pwritev, buf, slot * self.slot_bytes)
        dt = time.perf_counter() - t0
        if n != len(buf):
            raise OSError(f"short O_DIRECT write ({n} of {len(buf)} bytes)")
        return dt

    def read(self, buf: memoryview, slot: int, prio: IoPrio | None) -> float:
        """Synchronous O_DIRECT read of a slot into `buf`; returns seconds spent in the call."""
        self._tag(prio)
        t0 = time.perf_counter()
        n = self._io(os.preadv, buf, slot * self.slot_bytes)
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
