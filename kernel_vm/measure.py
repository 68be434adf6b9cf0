"""What the parent reads about the arena process: faults, per-page residency, PSI, vmstat, memcg counters.

Per-page state comes from /proc/<pid>/pagemap (one u64 per virtual page: bit 63 present, bit 62 swapped;
the flag bits are readable by anyone who may ptrace the process, PFNs need CAP_SYS_ADMIN and are not used).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PRESENT_BIT = np.uint64(1 << 63)
SWAPPED_BIT = np.uint64(1 << 62)


@dataclass(frozen=True)
class Faults:
    minor: int
    major: int

    def __sub__(self, other: "Faults") -> "Faults":
        return Faults(self.minor - other.minor, self.major - other.major)


def faults(pid: int) -> Faults:
    """minflt and majflt of one process (/proc/<pid>/stat fields 10 and 12; psutil has no fault API)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    rest = text[text.rindex(")") + 2:].split()  # fields from 3 (state) on
    return Faults(minor=int(rest[7]), major=int(rest[9]))


def pagemap(pid: int, address: int, n_pages: int, page_bytes: int) -> np.ndarray:
    """The raw pagemap entries of n_pages pages starting at address."""
    fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
    try:
        want = n_pages * 8
        buf = bytearray()
        offset = (address // page_bytes) * 8
        while len(buf) < want:
            chunk = os.pread(fd, min(want - len(buf), 1 << 22), offset + len(buf))
            if not chunk:
                raise OSError(f"short read from /proc/{pid}/pagemap")
            buf += chunk
    finally:
        os.close(fd)
    return np.frombuffer(bytes(buf), dtype=np.uint64)


@dataclass(frozen=True)
class Residency:
    """Per page: resident (present), swapped (a swap entry), or neither (never touched / dropped)."""

    present: np.ndarray  # bool per page
    swapped: np.ndarray  # bool per page

    @classmethod
    def of(cls, pid: int, address: int, n_pages: int, page_bytes: int) -> "Residency":
        e = pagemap(pid, address, n_pages, page_bytes)
        return cls((e & PRESENT_BIT) != 0, (e & SWAPPED_BIT) != 0)

    def by_class(self, page_class: np.ndarray, n_classes: int) -> dict[str, list[int]]:
        """Counts per class index: resident, swapped, absent (neither)."""
        absent = ~(self.present | self.swapped)
        return {
            "resident": np.bincount(page_class[self.present], minlength=n_classes).tolist(),
            "swapped": np.bincount(page_class[self.swapped], minlength=n_classes).tolist(),
            "absent": np.bincount(page_class[absent], minlength=n_classes).tolist(),
        }


def psi_memory() -> dict[str, float]:
    """System-wide memory PSI totals in microseconds (some, full). Shared with everything on the host."""
    out: dict[str, float] = {}
    try:
        text = Path("/proc/pressure/memory").read_text()
    except OSError:
        return out  # CONFIG_PSI off (doctor: psi.memory); the summary then has no PSI figures
    for line in text.splitlines():
        kind, *fields = line.split()
        for f in fields:
            k, _, v = f.partition("=")
            if k == "total":
                out[kind] = float(v)
    return out


VMSTAT_KEYS = ("pswpin", "pswpout", "pgmajfault", "pgscan_anon", "pgsteal_anon", "pgscan_direct",
               "pgscan_kswapd", "allocstall_normal", "zswpin", "zswpout", "zswpwb", "workingset_refault_anon")


def vmstat() -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k in VMSTAT_KEYS:
            out[k] = int(v)
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0) for k in after}


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self.t0
