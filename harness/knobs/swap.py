"""Swap backends kvds sets up for memory-pressure experiments: zram devices and swapfiles."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.journal import get_journal, undo_handler
from harness.knobs.files import create_file

ZRAM_CONTROL = Path("/sys/class/zram-control")


def active_swaps() -> list[str]:
    lines = Path("/proc/swaps").read_text().splitlines()[1:]
    return [line.split()[0] for line in lines if line.strip()]


def _run(cmd: list[str]) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise OSError(f"{' '.join(cmd)} failed: {res.stderr.strip() or res.stdout.strip()}")


def swapon(device: str, priority: int | None = None) -> None:
    """Enable swap on a device or file; restore swaps it off."""
    j = get_journal()
    seq = j.record("swapon", {"device": device}, f"swapon {device}")
    cmd = ["swapon"] + (["-p", str(priority)] if priority is not None else []) + [device]
    _run(cmd)
    j.done(seq)


@undo_handler("swapon")
def _undo_swapon(a: dict[str, Any]) -> None:
    if os.path.realpath(a["device"]) in {os.path.realpath(s) for s in active_swaps()}:
        _run(["swapoff", a["device"]])


def zram_device(size_bytes: int, algorithm: str | None = None) -> str:
    """A fresh zram device of its own (hot_add), so kvds never borrows zram0 from anyone."""
    j = get_journal()
    seq = j.record("zram", {}, "zram device")
    ident = int((ZRAM_CONTROL / "hot_add").read_text().strip())
    j.done(seq, id=ident)
    sysdir = Path(f"/sys/block/zram{ident}")
    if algorithm:
        (sysdir / "comp_algorithm").write_text(algorithm)
    (sysdir / "disksize").write_text(str(size_bytes))
    j.owned_devices.add(f"zram{ident}")
    return f"/dev/zram{ident}"


def zram_swap(size_bytes: int, priority: int | None = 100, algorithm: str | None = None) -> str:
    """zram swap: mkswap + swapon on a fresh zram device. Returns "/dev/zramN"."""
    dev = zram_device(size_bytes, algorithm)
    _run(["mkswap", "-f", dev])
    swapon(dev, priority)
    return dev


@undo_handler("zram")
def _undo_zram(a: dict[str, Any]) -> None:
    ident = a.get("id")
    if ident is None:
        return  # died between journaling and hot_add's answer: no device number to remove
    dev = f"/dev/zram{ident}"
    sysdir = Path(f"/sys/block/zram{ident}")
    if not sysdir.exists():
        return
    if dev in active_swaps():
        _run(["swapoff", dev])
    for attempt in range(50):
        try:
            (sysdir / "reset").write_text("1")
            (ZRAM_CONTROL / "hot_remove").write_text(str(ident))
            return
        except OSError:
            if attempt == 49:
                raise
            time.sleep(0.1)  # EBUSY while udev or blkid still holds the device open


def swapfile(path: str | Path, size_bytes: int, priority: int | None = None) -> str:
    """A swapfile with real blocks (not sparse), mkswap'ed and enabled; restore removes it."""
    p = create_file(path)
    _run(["fallocate", "-l", str(size_bytes), str(p)])
    os.chmod(p, 0o600)
    _run(["mkswap", "-f", str(p)])
    swapon(str(p), priority)
    return str(p)
