"""Swap backends for the bench, set up through the knob journal: zram, a swapfile, or zswap over a swapfile.

zram: a fresh device (hot_add, never zram0) at priority 100. swapfile: an fallocated ext4 file under
work_dir(). zswap: the same swapfile with zswap enabled in front of it (module parameter `enabled`, journaled),
pool statistics from debugfs. Every backend is removed on restore; zswap's parameter goes back to its old value.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import knobs
from harness.errors import UserError
from harness.paths import work_dir

BACKENDS = ("zram", "swapfile", "zswap")
ZSWAP_PARAMS = Path("/sys/module/zswap/parameters")
ZSWAP_DEBUG = "zswap"
SWAP_PRIORITY = 100


@dataclass
class SwapBackend:
    kind: str
    device: str
    size_bytes: int
    notes: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "device": self.device, "size_bytes": self.size_bytes, **self.notes}


def _swapfile_path() -> Path:
    d = work_dir() / f"vm-{os.getpid()}-{time.time_ns()}"
    knobs.create_dir(d)
    return d / "swapfile"


def set_up(kind: str, size_bytes: int) -> SwapBackend:
    """Create and enable the backend (root). Sizes are rounded up to whole MiB."""
    if kind not in BACKENDS:
        raise UserError(f"--swap must be one of {', '.join(BACKENDS)}, not {kind!r}")
    size = -(-size_bytes // (1 << 20)) * (1 << 20)
    if kind == "zram":
        dev = knobs.zram_swap(size, priority=SWAP_PRIORITY)
        algo = knobs.read_knob(f"/sys/block/{Path(dev).name}/comp_algorithm")
        return SwapBackend(kind, dev, size, {"comp_algorithm": algo})
    if kind == "zswap":
        knobs.write_knob(ZSWAP_PARAMS / "enabled", "Y")
    path = knobs.swapfile(_swapfile_path(), size, priority=SWAP_PRIORITY)
    notes = {}
    if kind == "zswap":
        notes = {p: knobs.read_knob(ZSWAP_PARAMS / p) for p in ("compressor", "zpool", "max_pool_percent")
                 if (ZSWAP_PARAMS / p).exists()}
    return SwapBackend(kind, path, size, notes)


def zswap_enabled() -> bool:
    f = ZSWAP_PARAMS / "enabled"
    return f.exists() and f.read_text().strip() in ("Y", "1")


def zswap_stats() -> dict[str, int]:
    """zswap pool counters from debugfs (mounted through the journal if needed): stored pages, pool size,
    written back, rejections."""
    root = Path(knobs.ensure_debugfs()) / ZSWAP_DEBUG
    out: dict[str, int] = {}
    if not root.is_dir():
        return out
    for f in sorted(root.iterdir()):
        try:
            out[f.name] = int(f.read_text().strip())
        except (OSError, ValueError):
            continue
    return out


def zram_stats(device: str) -> dict[str, int]:
    """mm_stat of a zram device: orig_data_size, compr_data_size, mem_used_total, ..., same_pages."""
    names = ("orig_data_size", "compr_data_size", "mem_used_total", "mem_limit", "mem_used_max",
             "same_pages", "pages_compacted", "huge_pages")
    f = Path(f"/sys/block/{Path(device).name}/mm_stat")
    if not f.exists():
        return {}
    return dict(zip(names, (int(x) for x in f.read_text().split())))


def written_bytes(device: str) -> int:
    """Bytes written to a swap block device since it was set up: the block layer's write sectors
    (/sys/block/<dev>/stat field 7, 512-byte units). Counts every swap-out, also where the kernel has no VM event
    counters (the guest lab's allnoconfig-style kernel has no pswpout in /proc/vmstat)."""
    fields = Path(f"/sys/block/{Path(device).name}/stat").read_text().split()
    return int(fields[6]) * 512
