"""Pseudo-filesystem mounts kvds needs (tracefs, debugfs), unmounted on restore if kvds mounted them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from harness.journal import get_journal, undo_handler

TRACEFS = "/sys/kernel/tracing"
DEBUGFS = "/sys/kernel/debug"


def mounts() -> list[tuple[str, str]]:
    """(mount point, fstype) pairs from /proc/self/mountinfo."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        out.append((left.split()[4], right.split()[0]))
    return out


def is_mounted(target: str, fstype: str | None = None) -> bool:
    t = os.path.realpath(target)
    return any(m == t and (fstype is None or f == fstype) for m, f in mounts())


def mount(fstype: str, target: str, source: str = "nodev") -> bool:
    """Mount fstype at target unless already mounted; returns True when kvds mounted it."""
    if is_mounted(target, fstype):
        return False
    j = get_journal()
    seq = j.record("mount", {"target": target, "fstype": fstype}, f"mount {fstype} on {target}")
    res = subprocess.run(["mount", "-t", fstype, source, target], capture_output=True, text=True)
    if res.returncode != 0:
        raise OSError(f"mount -t {fstype} {target}: {res.stderr.strip()}")
    j.done(seq)
    return True


@undo_handler("mount")
def _undo_mount(a: dict[str, Any]) -> None:
    if is_mounted(a["target"], a["fstype"]):
        res = subprocess.run(["umount", a["target"]], capture_output=True, text=True)
        if res.returncode != 0:
            # Busy (a tool still holds a trace pipe): detach lazily so the knob still goes back.
            subprocess.run(["umount", "-l", a["target"]], capture_output=True, text=True, check=True)


def ensure_tracefs() -> str:
    """tracefs at /sys/kernel/tracing (mounted through the journal when it is not)."""
    if not is_mounted(TRACEFS, "tracefs"):
        mount("tracefs", TRACEFS)
    return TRACEFS


def ensure_debugfs() -> str:
    if not is_mounted(DEBUGFS, "debugfs"):
        mount("debugfs", DEBUGFS)
    return DEBUGFS
