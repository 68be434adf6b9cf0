"""Pseudo-filesystem mounts kvds needs (tracefs, debugfs), shared safely between concurrent kvds processes.

Every kvds process that relies on a mount joins it in the machine-wide registry (harness/knobs/shared.py),
noting whether the mount was there before kvds. Restoring leaves the registry; only the last live user
unmounts, and only a mount kvds made: nobody pulls tracefs from under another run, and a mount the system
made is never touched.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from harness.journal import get_journal, undo_handler
from harness.knobs import shared

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


SYSTEM, KVDS = "system", "kvds"


def mount(fstype: str, target: str, source: str = "nodev") -> bool:
    """Mount fstype at target unless already mounted; returns True when this call mounted it."""
    j = get_journal()
    was_mounted = is_mounted(target, fstype)
    key = f"mount:{os.path.realpath(target)}"
    token = shared.join(key, SYSTEM if was_mounted else KVDS)
    seq = j.record("mount", {"target": target, "fstype": fstype, "key": key, "token": token},
                   f"{'use of' if was_mounted else 'mount'} {fstype} on {target}")
    if not was_mounted and not is_mounted(target, fstype):
        res = subprocess.run(["mount", "-t", fstype, source, target], capture_output=True, text=True)
        if res.returncode != 0:
            raise OSError(f"mount -t {fstype} {target}: {res.stderr.strip()}")
    j.done(seq)
    return not was_mounted


@undo_handler("mount")
def _undo_mount(a: dict[str, Any]) -> None:
    if shared.leave(a["key"], a["token"]) != KVDS or not is_mounted(a["target"], a["fstype"]):
        return
    res = subprocess.run(["umount", a["target"]], capture_output=True, text=True)
    if res.returncode != 0:
        # Busy (a tool still holds a trace pipe): detach lazily so the knob still goes back.
        subprocess.run(["umount", "-l", a["target"]], capture_output=True, text=True, check=True)


def ensure_tracefs() -> str:
    """tracefs at /sys/kernel/tracing (mounted through the journal when it is not)."""
    mount("tracefs", TRACEFS)
    return TRACEFS


def ensure_debugfs() -> str:
    mount("debugfs", DEBUGFS)
    return DEBUGFS
