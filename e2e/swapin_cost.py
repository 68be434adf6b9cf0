"""What one swap-in costs on this kernel's swap (the run's zram), measured once per run: the simulator has no term
for the arena pages the squeeze's reclaim takes and the replay faults back, so e2e adds swap-ins per step times this
cost to the simulated TPOT (e2e/figures.py) and shows that prediction beside the measurement.

A scratch mapping of distinct pages is pushed to swap (MADV_PAGEOUT) and read back a page at a time, each read
timed; the cost is the median of those reads less the median of the same reads once the pages are resident (the
interpreter's own cost of a read). The reads back must be major faults, counted, or the figure is not a swap-in's.
"""
from __future__ import annotations

import mmap
import resource
import time
from typing import Any

import numpy as np

MADV_PAGEOUT = 21   # Python 3.11's mmap lacks the name
PAGES = 1024


def _timed_reads(m: mmap.mmap, pages: int) -> np.ndarray:
    """Nanoseconds of a one-byte read of each page, in order."""
    out = np.empty(pages, dtype=np.int64)
    page = mmap.PAGESIZE
    clock = time.perf_counter_ns
    for i in range(pages):
        t0 = clock()
        m[i * page]
        out[i] = clock() - t0
    return out


def measure(pages: int = PAGES) -> dict[str, Any]:
    """The median cost of a swap-in (us) on the swap now active, with what it rests on."""
    page = mmap.PAGESIZE
    m = mmap.mmap(-1, pages * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for i in range(pages):  # distinct content: zram stores same-filled pages without compressing them
            m[i * page:i * page + 8] = (i + 1).to_bytes(8, "little")
            m[i * page + 8:(i + 1) * page] = bytes([i % 251 + 1]) * (page - 8)
        m.madvise(MADV_PAGEOUT)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        paged = _timed_reads(m, pages)
        majfaults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - before
        resident = _timed_reads(m, pages)
    finally:
        m.close()
    swap_in_us = max(0.0, float(np.median(paged) - np.median(resident)) / 1e3)
    return {"swap_in_us": swap_in_us, "pages": pages, "major_faults": int(majfaults),
            "resident_read_us": float(np.median(resident)) / 1e3,
            "valid": majfaults >= pages * 9 // 10}
