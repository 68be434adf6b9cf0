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
    """O_DIRECT reads and writes at slot offsets of a device (or file), tagged with an ioprio per call.

    Every transfer is staged through a page-aligned buffer of the calling thread's own (a read lands there and is
    copied into the arena's slot; a write copies the slot there first), never DMA'd straight into or out of the
    arena: the fast tier stands for an engine's pageable KV pool, and real engines stage transfers through a pinned
    buffer of their own too. Handed the arena's pages, the kernel pins them for the call (GUP, which marks them
    accessed) and must first fault back in those a squeeze took, which against a full memory group fails with
    ENOMEM (measured on this host, cgroup v1, a 2,398-slot arena of 8 KiB slots squeezed 10%, 36,000 random spills
    straight from the arena: 118-236 ENOMEM retries in 5 of 8 runs, none in the other 3; staged, none in any, and
    tests/e2e/test_e2e_squeeze_keeps_owner.py holds that). Whether pinning also makes the group's reclaim give up
    (faults waiting for e2e's OOM guard: 133-272 pinned in those 5 runs, but 0-299 staged) was not settled. The copy
    is inside the timed call: a reclaimed slot's pages come back through the copy, as a fault charged to the
    replay."""

    def __init__(self, path: str, slot_bytes: int) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.slot_bytes = slot_bytes
        self._prio = threading.local()
        self._stages: list[tuple[mmap.mmap, memoryview]] = []
        self._lock = threading.Lock()

    def _stage(self, n: int) -> memoryview:
        """This thread's staging buffer, n bytes of it (allocated on its first transfer, freed by close)."""
        st = getattr(self._prio, "stage", None)
        if st is None or len(st) < n:
            m = mmap.mmap(-1, max(n, self.slot_bytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            st = memoryview(m)
            with self._lock:
                self._stages.append((m, st))
            self._prio.stage = st
        return st[:n]

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
        stage = self._stage(len(buf))
        stage[:] = buf
        n = self._io(os.pwritev, stage, slot * self.slot_bytes)
        dt = time.perf_counter() - t0
        if n != len(buf):
            raise OSError(f"short O_DIRECT write ({n} of {len(buf)} bytes)")
        return dt

    def read(self, buf: memoryview, slot: int, prio: IoPrio | None) -> float:
        """Synchronous O_DIRECT read of a slot into `buf`; returns seconds spent in the call."""
        self._tag(prio)
        t0 = time.perf_counter()
        stage = self._stage(len(buf))
        n = self._io(os.preadv, stage, slot * self.slot_bytes)
        if n == len(buf):
            buf[:] = stage
        dt = time.perf_counter() - t0
        if n != len(buf):
            raise OSError(f"short O_DIRECT read ({n} of {len(buf)} bytes)")
        return dt

    def close(self) -> None:
        os.close(self.fd)
        with self._lock:
            for m, view in self._stages:
                try:
                    view.release()
                    m.close()
                except BufferError:  # a slice still held by a thread unwinding: the mapping goes with the process
                    pass
            self._stages.clear()


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
