"""Real operations for replay: a page-aligned anonymous arena (the fast tier) and O_DIRECT I/O
on a kvds loop device (the slow tier), each I/O issued under the ioprio class of its intent.
"""
from __future__ import annotations

import mmap
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from harness.ioprio import IoPrio, set_ioprio

PAGE = mmap.PAGESIZE


class Arena:
    """`slots` fixed-size slots of private anonymous memory, pre-faulted so hits measure reads, not faults."""

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.slot_bytes = slot_bytes
        self.size = slots * slot_bytes
        self.mem = mmap.mmap(-1, self.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.view = memoryview(self.mem)
        pattern = bytes(range(256)) * (PAGE // 256)
        for off in range(0, self.size, PAGE):
            self.mem[off:off + PAGE] = pattern
        self.sink = bytearray(slot_bytes)  # destination of hit reads (models the copy to the accelerator)

    def slot(self, i: int, nbytes: int) -> memoryview:
        off = i * self.slot_bytes
        return self.view[off:off + nbytes]

    def read(self, i: int, nbytes: int) -> None:
        """Read the block's bytes (a memcpy out of the arena)."""
        self.sink[:nbytes] = self.slot(i, nbytes)

    def produce(self, i: int, nbytes: int, stamp: int) -> None:
        """Write fresh KV bytes into a slot (new block)."""
        off = i * self.slot_bytes
        self.mem[off:off + 8] = stamp.to_bytes(8, "little")

    def close(self) -> None:
        self.view.release()
        self.mem.close()


class Device:
    """O_DIRECT reads and writes at slot offsets of a block device, tagged with an ioprio per call."""

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
