"""Pseudo-filesystem mounts kvds needs (tracefs, debugfs), shared safely between concurrent kvds processes.

A mount kvds made is marked in the state directory; every kvds process that relies on such a mount records a
"use" in its journal. Restoring a use or the mount itself unmounts only when no other live kvds process still
uses it and the mount is kvds's: the last user puts the machine back, nobody pulls tracefs from under another
run, and a mount the system made is never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from harness.journal import get_journal, live_journal_entries, undo_handler
from harness.paths import state_dir

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


def _marker(target: str) -> Path:
    return state_dir() / "mounts" / (os.path.realpath(target).strip("/").replace("/", "_") or "root")


def mount(fstype: str, target: str, source: str = "nodev") -> bool:
    """Mount fstype at target unless already mounted; returns True when this call mounted it."""
    j = get_journal()
    args = {"target": target, "fstype": fstype}
    if is_mounted(target, fstype):
        if _marker(target).exists():
            j.done(j.record("mount_use", args, f"use of kvds's {fstype} mount on {target}"))
        return False
    seq = j.record("mount", args, f"mount {fstype} on {target}")
    res = subprocess.run(["mount", "-t", fstype, source, target], capture_output=True, text=True)
    if res.returncode != 0:
        raise OSError(f"mount -t {fstype} {target}: {res.stderr.strip()}")
    m = _marker(target)
    m.parent.mkdir(parents=True, exist_ok=True)
    m.write_text(json.dumps({"pid": os.getpid(), "fstype": fstype}))
    j.done(seq)
    return True


def _others_use(target: str) -> bool:
    real = os.path.realpath(target)
    return any(e["kind"] in ("mount", "mount_use") and os.path.realpath(e["undo"]["target"]) == real
               for e in live_journal_entries(exclude_pid=os.getpid()))


@undo_handler("mount")
@undo_handler("mount_use")
def _undo_mount(a: dict[str, Any]) -> None:
    if not is_mounted(a["target"], a["fstype"]) or _others_use(a["target"]):
        return
    if not _marker(a["target"]).exists():
        return  # not kvds's mount (the system mounted it since): leave it
    res = subprocess.run(["umount", a["target"]], capture_output=True, text=True)
    if res.returncode != 0:
        # Busy (a tool still holds a trace pipe): detach lazily so the knob still goes back.
        subprocess.run(["umount", "-l", a["target"]], capture_output=True, text=True, check=True)
    _marker(a["target"]).unlink(missing_ok=True)


def ensure_tracefs() -> str:
    """tracefs at /sys/kernel/tracing (mounted through the journal when it is not)."""
    mount("tracefs", TRACEFS)
    return TRACEFS


def ensure_debugfs() -> str:
    mount("debugfs", DEBUGFS)
    return DEBUGFS
