"""The KV arena: a private anonymous mapping of page-aligned blocks, and what its process does to it.

Every madvise goes through libc on page-aligned block ranges of the mapping's own address (Python's
`mmap.madvise` would do, but it lacks the advice constants and the public prototype's unaligned ranges
failed with EINVAL; a block is a whole number of pages, so every range here is aligned by construction).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.restype = ctypes.c_int
for _f in (_libc.mlock, _libc.munlock):
    _f.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    _f.restype = ctypes.c_int
MLOCK, MUNLOCK = -1, -2
"""Call codes besides madvise advice (>= 0) in `Arena.run_calls` (kernel_vm/churn.py builds the lists)."""
PR_SET_THP_DISABLE = 41


def disable_thp() -> None:
    """No transparent huge pages for this process (prctl, inherited, works without CONFIG_ADVISE_SYSCALLS).

    With THP `always` (the guest lab kernel) one byte written by the protect pass faults a whole 2 MiB page,
    charging the interleaved squeeze blocks around it to the protect group too: per-class placement and per-page
    eviction both need base pages."""
    if _libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_THP_DISABLE): {os.strerror(err)}")


def check_fits(n_bytes: int) -> None:
    """Refuse an arena larger than the memory this host has available: populating it would push the whole
    machine into reclaim (or the OOM killer) instead of squeezing kvds's own cgroup."""
    avail = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            avail = int(line.split()[1]) << 10
    if avail and n_bytes > avail:
        raise UserError(f"--arena-mb {n_bytes >> 20} is more than the {avail >> 20} MiB of memory available "
                        "on this host")


def page_content(page_bytes: int, seed: int = 1) -> bytes:
    """One page of KV-like data: half noise, half a repeating pattern (compresses about 2:1, never a
    same-filled page that zram would store for free)."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, page_bytes // 2, dtype=np.uint8).tobytes()
    return noise + bytes(range(256)) * (page_bytes // 2 // 256)


class Arena:
    """The mapping, living in the process that faults it (memcg charges pages to that process's group).

    The VM bench's arena process and the policy replay's fast tier (kv_policy/replay/session.py, which calls a block a
    slot) are both this class."""

    def __init__(self, n_bytes: int, block_bytes: int, thp_off: bool = True) -> None:
        """thp_off: disable THP for this whole process (the VM bench's per-page placement and eviction need base
        pages); replay keeps the host's THP setting, as a serving engine's process would."""
        self.page_bytes = mmap.PAGESIZE
        if block_bytes % self.page_bytes or n_bytes % block_bytes:
            raise ValueError("arena and block sizes must be whole pages and whole blocks")
        self.block_bytes = block_bytes
        self.n_bytes = n_bytes
        if thp_off:
            disable_thp()
        self.map = mmap.mmap(-1, n_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self._anchor = ctypes.c_char.from_buffer(self.map)
        self.address = ctypes.addressof(self._anchor)
        assert self.address % self.page_bytes == 0
        self._view = memoryview(self.map)
        self._sink = bytearray(block_bytes)  # where read() copies a block (the copy to the accelerator)
        self._page = page_content(self.page_bytes)
        self._block = self._page * (block_bytes // self.page_bytes)
        self.pages_per_block = block_bytes // self.page_bytes

    @property
    def n_blocks(self) -> int:
        return self.n_bytes // self.block_bytes

    def slot(self, block: int, nbytes: int) -> memoryview:
        """The first nbytes of a block as a view of the mapping (O_DIRECT I/O reads into it and writes from it)."""
        off = block * self.block_bytes
        return self._view[off:off + nbytes]

    def read(self, block: int, nbytes: int) -> None:
        """Copy a block's first nbytes out of the arena (a hit: what a decode step pays for a resident block)."""
        self._sink[:nbytes] = self.slot(block, nbytes)

    def produce(self, block: int, nbytes: int, stamp: int) -> None:
        """New KV data in a block's first nbytes (nbytes <= block_bytes): the stamp at its start marks whose data
        it is, so a block that went to a slow tier and came back can be checked."""
        if nbytes > self.block_bytes:
            raise ValueError(f"{nbytes} bytes do not fit a {self.block_bytes}-byte block")
        off = block * self.block_bytes
        self.map[off:off + 8] = stamp.to_bytes(8, "little")

    def close(self) -> None:
        """Unmap (the VM bench's arena process just exits; replay closes its fast tier)."""
        self._view.release()
        del self._anchor
        self.map.close()

    def populate(self, blocks: np.ndarray) -> None:
        """Write every page of the blocks (first touch: the pages are charged to the caller's memcg now)."""
        m, bb = self.map, self.block_bytes
        for b in blocks.tolist():
            off = b * bb
            m[off:off + bb] = self._block
            # a per-page stamp so no two pages are identical (no KSM/zram dedup shortcuts)
            for p in range(self.pages_per_block):
                o = off + p * self.page_bytes
                m[o:o + 8] = (b * self.pages_per_block + p).to_bytes(8, "little")

    def madvise(self, blocks: np.ndarray, advice: int) -> list[str]:
        """Apply advice to each block's range; returns error texts (empty when all succeeded)."""
        errors: list[str] = []
        for start, length in block_runs(blocks, self.block_bytes):
            rc = _libc.madvise(self.address + start, length, advice)
            if rc != 0:
                e = ctypes.get_errno()
                errors.append(f"madvise({advice}) on +{start:#x}/{length:#x}: {errno.errorcode.get(e, e)}")
        return errors

    def run_calls(self, steps: list[list[tuple[int, int, int]]]) -> dict[str, Any]:
        """Issue each step's (offset, length, code) calls: madvise advice (code >= 0), mlock or munlock. Per step
        the calls, this thread's CPU time (user + system: the kernel's work for the calls is in it) and wall time,
        in ns; errors as text."""
        thread, wall = time.thread_time_ns, time.perf_counter_ns
        calls, cpu, elapsed, errors = [], [], [], []
        for step in steps:
            c0, w0 = thread(), wall()
            for off, length, code in step:
                addr = self.address + off
                rc = (_libc.mlock(addr, length) if code == MLOCK else _libc.munlock(addr, length) if code == MUNLOCK
                      else _libc.madvise(addr, length, code))
                if rc != 0:
                    errors.append(f"call {code} on +{off:#x}/{length:#x}: {errno.errorcode.get(ctypes.get_errno())}")
            cpu.append(thread() - c0)
            elapsed.append(wall() - w0)
            calls.append(len(step))
        return {"calls": calls, "cpu_ns": cpu, "wall_ns": elapsed, "errors": errors[:20]}

    def touch(self, blocks: np.ndarray) -> np.ndarray:
        """Read one byte of every page of the blocks in order; per-page latency in ns (int64).

        The first read of a page is what a decode step pays: resident (a TLB/cache miss), a minor fault
        (zero or swap-cache page), or a major fault (swap-in). The timer brackets only the load.
        """
        m, pb, ppb, bb = self.map, self.page_bytes, self.pages_per_block, self.block_bytes
        clock = time.perf_counter_ns
        out = array("q", bytes(8 * ppb * int(blocks.size)))
        i = 0
        sink = 0
        for b in blocks.tolist():
            base = b * bb
            for p in range(ppb):
                off = base + p * pb
                t0 = clock()
                sink ^= m[off]
                out[i] = clock() - t0
                i += 1
        return np.frombuffer(out, dtype=np.int64).copy()


def block_runs(blocks: np.ndarray, block_bytes: int) -> list[tuple[int, int]]:
    """Merge runs of consecutive block indices into (offset, length) ranges (fewer syscalls, same effect)."""
    out: list[tuple[int, int]] = []
    for b in sorted(blocks.tolist()):
        if out and out[-1][0] + out[-1][1] == b * block_bytes:
            out[-1] = (out[-1][0], out[-1][1] + block_bytes)
        else:
            out.append((b * block_bytes, block_bytes))
    return out


def timer_overhead_ns(samples: int = 20000) -> np.ndarray:
    """Back-to-back perf_counter_ns pairs: the floor under every per-page latency sample."""
    clock = time.perf_counter_ns
    out = np.empty(samples, dtype=np.int64)
    for i in range(samples):
        t0 = clock()
        out[i] = clock() - t0
    return out

