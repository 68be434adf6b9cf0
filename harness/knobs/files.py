"""Journaled writes of sysfs/procfs/sysctl values, and scratch files/directories kvds creates."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.journal import get_journal, undo_handler
from harness.knobs import shared
from harness.knobs.guards import check_write

SHARED_KNOBS = frozenset({
    "/proc/sys/kernel/task_delayacct",
    "/sys/module/zswap/parameters/enabled",
})
"""Host-wide switches several kvds processes may rely on at once: restored by the last user, to the value the
first one found (harness/knobs/shared.py), so one run finishing never switches off another's instrument."""


def read_knob(path: str | Path) -> str:
    """A knob's current value; for "[selected] other" lists (schedulers, THP) the selected word."""
    text = Path(path).read_text().strip()
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _write_shared(p: str, value: str | int) -> str:
    j = get_journal()
    old = read_knob(p)
    seq = j.record("file_shared", {"path": p, "token": shared.join(p, old)}, f"{p} (shared) = {old}")
    if old != str(value):
        _write(p, str(value))
    j.done(seq)
    return old


@undo_handler("file_shared")
def _undo_file_shared(a: dict[str, Any]) -> None:
    original = shared.leave(a["path"], a["token"])
    if original is not None and os.path.exists(a["path"]) and read_knob(a["path"]) != original:
        _write(a["path"], original)


def write_knob(path: str | Path, value: str | int) -> str:
    """Write a kernel knob, journaling its old value first. Returns the old value."""
    p = str(path)
    j = get_journal()
    check_write(p, j.owned_kdamonds)
    if p in SHARED_KNOBS:
        return _write_shared(p, value)
    old = read_knob(p)
    if old == str(value):
        return old
    seq = j.record("file", {"path": p, "old": old}, f"{p} = {old}")
    _write(p, str(value))
    j.done(seq)
    return old


@undo_handler("file")
def _undo_file(a: dict[str, Any]) -> None:
    if not os.path.exists(a["path"]):
        return  # the object it belonged to is gone (a removed device): nothing to restore
    if read_knob(a["path"]) != a["old"]:
        _write(a["path"], a["old"])


def sysctl(name: str, value: str | int) -> str:
    """Set a sysctl ("kernel.task_delayacct") through /proc/sys; returns the old value."""
    return write_knob("/proc/sys/" + name.replace(".", "/"), value)


def check_space(path: Path, size: int) -> None:
    """Refuse a scratch file larger than the free space of the filesystem it would land on: a size typed with
    one digit too many (--kv-mib, --size-mib, --file-mib) must not fill the machine's disk."""
    d = path.parent
    while not d.exists():
        d = d.parent
    free = shutil.disk_usage(d).free
    if size > free:
        raise UserError(f"{path} would need {size >> 20} MiB but {d} has {free >> 20} MiB free; ask for a "
                        "smaller size or put kvds's scratch files elsewhere (KVDS_WORK_DIR / --work-dir)")


def create_file(path: str | Path, size: int = 0, fill: bytes | None = None) -> Path:
    """Create a scratch file kvds owns (removed on restore); fill writes real data, not a sparse hole."""
    p = Path(path)
    j = get_journal()
    if p.exists():
        raise FileExistsError(errno.EEXIST, f"{p} already exists")
    if size:
        check_space(p, size)
    p.parent.mkdir(parents=True, exist_ok=True)
    seq = j.record("create_file", {"path": str(p)}, f"created {p}")
    with open(p, "wb") as fh:
        if size and fill is not None:
            chunk = (fill * (1 << 20 // max(1, len(fill)) + 1))[: 1 << 20]
            left = size
            while left > 0:
                n = min(left, len(chunk))
                fh.write(chunk[:n])
                left -= n
        elif size:
            fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())
    j.done(seq)
    return p


@undo_handler("create_file")
def _undo_create_file(a: dict[str, Any]) -> None:
    Path(a["path"]).unlink(missing_ok=True)


def create_dir(path: str | Path) -> Path:
    """Create a scratch directory kvds owns; restore removes it with its contents."""
    p = Path(path)
    j = get_journal()
    if p.exists():
        raise FileExistsError(errno.EEXIST, f"{p} already exists")
    seq = j.record("create_dir", {"path": str(p)}, f"created directory {p}")
    p.mkdir(parents=True)
    j.done(seq)
    return p


@undo_handler("create_dir")
def _undo_create_dir(a: dict[str, Any]) -> None:
    shutil.rmtree(a["path"], ignore_errors=True)
