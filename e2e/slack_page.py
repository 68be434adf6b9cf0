"""The replay's side of the spill scheduler's shared page (io_priority/ioload.c `struct slack_state`).

ioload's deadline writer (spill scheduler v2) fits its write batches into the slack before the next critical read is
due, reading that time from a page the reader publishes. In the end-to-end experiment the "reader" is the decode
loop itself: at the end of each step it publishes when the next step's reads are due (now + the modelled compute),
marks a step in flight while it reads, and wakes the writer's futex after each step, as ioload's own reader does.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import platform
import time
from pathlib import Path

# struct slack_state: six int64 then the uint32 futex word (io_priority/ioload.c)
NEXT_DUE, INFLIGHT_SINCE, READS_DONE, INTERVAL, READ_SEQ = 0, 8, 16, 24, 48
SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine(), 202)
FUTEX_WAKE = 1
_libc = ctypes.CDLL(None, use_errno=True)


class SlackPage:
    """The page at `path` (a kvds scratch file in /dev/shm, 4 KiB, zeroed here)."""

    def __init__(self, path: Path, interval_ns: int) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        self.map[:] = bytes(4096)
        self._i64 = lambda off: ctypes.c_int64.from_buffer(self.map, off)
        self.next_due, self.inflight = self._i64(NEXT_DUE), self._i64(INFLIGHT_SINCE)
        self.reads, self.interval = self._i64(READS_DONE), self._i64(INTERVAL)
        self.seq = ctypes.c_uint32.from_buffer(self.map, READ_SEQ)
        self.interval.value = interval_ns
        self.next_due.value = time.monotonic_ns()

    def step_begin(self) -> None:
        """A step's reads are in flight: the writer submits nothing until step_end."""
        self.inflight.value = time.monotonic_ns()

    def step_end(self, next_due_ns: int) -> None:
        """The step is done; the next one's reads are due at next_due_ns (CLOCK_MONOTONIC, ioload's clock)."""
        self.next_due.value = next_due_ns
        self.inflight.value = 0
        self.reads.value += 1
        self.seq.value = (self.seq.value + 1) & 0xFFFFFFFF
        _libc.syscall(SYS_FUTEX, ctypes.c_void_p(ctypes.addressof(self.seq)), FUTEX_WAKE, 0x7FFFFFFF, None, None, 0)

    def close(self) -> None:
        del self.next_due, self.inflight, self.reads, self.interval, self.seq
        self.map.close()
