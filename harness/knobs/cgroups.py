"""Control groups kvds creates (memory limits, blkio throttles) and the processes it moves into them.

Works on cgroup v2 where the controller is enabled there, and on v1 hierarchies otherwise (this host has
memory and blkio on v1 only). kvds creates groups named kvds-<pid>-<name> directly under the root, so
concurrent runs never share a parent (and children inside those, `create_child`, where one limit must cover
two); values written inside them are not journaled one by one because removing the group (the undo of its
creation) removes them all.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import Unavailable
from harness.journal import get_journal, undo_handler
from harness.knobs.mounts import mounts

V2_CONTROLLERS_ALIASES = {"blkio": "io"}


def _mountinfo() -> list[tuple[str, str, set[str]]]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        parts = right.split()
        if parts and parts[0] in ("cgroup", "cgroup2"):
            opts = set(parts[2].split(",")) if len(parts) > 2 else set()
            out.append((left.split()[4], parts[0], opts))
    return out


def v2_root() -> Path | None:
    for mp, fs, _ in _mountinfo():
        if fs == "cgroup2":
            return Path(mp)
    return None


def hierarchy_for(controller: str) -> tuple[int, Path]:
    """(version, root) of the hierarchy that has `controller` ("memory", "blkio"/"io", "cpu")."""
    root2 = v2_root()
    v2name = V2_CONTROLLERS_ALIASES.get(controller, controller)
    if root2 is not None:
        try:
            if v2name in (root2 / "cgroup.controllers").read_text().split():
                return 2, root2
        except OSError:
            pass
    v1name = "blkio" if controller == "io" else controller
    for mp, fs, opts in _mountinfo():
        if fs == "cgroup" and v1name in opts:
            return 1, Path(mp)
    raise Unavailable(f"no cgroup hierarchy has the {controller} controller on this host")


@dataclass
class Cgroup:
    """A kvds-created cgroup, possibly spanning several v1 hierarchies."""

    name: str
    dirs: dict[str, Path] = field(default_factory=dict)  # controller -> directory
    versions: dict[str, int] = field(default_factory=dict)

    def path(self, controller: str) -> Path:
        return self.dirs[controller]

    def version(self, controller: str) -> int:
        return self.versions[controller]

    def set(self, controller: str, filename: str, value: str | int) -> None:
        (self.dirs[controller] / filename).write_text(str(value))

    def get(self, controller: str, filename: str) -> str:
        return (self.dirs[controller] / filename).read_text()

    def add_pid(self, pid: int) -> None:
        """Move a process into this group in every hierarchy; restore moves it back if it still lives."""
        j = get_journal()
        for d in dict.fromkeys(self.dirs.values()):
            origin = _current_cgroup_dir(pid, d)
            seq = j.record("cg_move", {"pid": pid, "origin": str(origin)}, f"moved pid {pid} to {d}")
            (d / "cgroup.procs").write_text(str(pid))
            j.done(seq)


def _current_cgroup_dir(pid: int, in_hierarchy_of: Path) -> Path:
    """The directory of pid's cgroup in the hierarchy that contains in_hierarchy_of."""
    root = in_hierarchy_of.parent
    for mp, fs, opts in _mountinfo():
        if in_hierarchy_of.is_relative_to(mp) and Path(mp) != in_hierarchy_of:
            root = Path(mp)
    rel = ""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hid, ctrls, path = line.split(":", 2)
        fs_v2 = hid == "0"
        if fs_v2 and root == v2_root():
            rel = path
        elif not fs_v2 and any(c in ctrls.split(",") for c in _opts_of(root)):
            rel = path
    return root / rel.lstrip("/")


def _opts_of(mount_point: Path) -> set[str]:
    for mp, fs, opts in _mountinfo():
        if Path(mp) == mount_point:
            return opts
    return set()


@undo_handler("cg_move")
def _undo_cg_move(a: dict[str, Any]) -> None:
    procs = Path(a["origin"]) / "cgroup.procs"
    if Path(f"/proc/{a['pid']}").exists() and procs.exists():
        try:
            procs.write_text(str(a["pid"]))
        except ProcessLookupError:
            pass


def _enable_v2(root: Path, controller: str) -> None:
    ctl = root / "cgroup.subtree_control"
    if controller in ctl.read_text().split():
        return
    j = get_journal()
    seq = j.record("cg_enable", {"file": str(ctl), "controller": controller}, f"+{controller} in {ctl}")
    ctl.write_text(f"+{controller}")
    j.done(seq)


@undo_handler("cg_enable")
def _undo_cg_enable(a: dict[str, Any]) -> None:
    ctl = Path(a["file"])
    if ctl.exists() and a["controller"] in ctl.read_text().split():
        try:
            ctl.write_text(f"-{a['controller']}")
        except OSError as exc:
            if exc.errno != errno.EBUSY:  # another user's group now needs it: leaving it on is correct
                raise


def create_cgroup(name: str, controllers: tuple[str, ...] = ("memory",)) -> Cgroup:
    """Create kvds-<pid>-<name> in the hierarchies holding the controllers; restore removes it."""
    j = get_journal()
    full = f"kvds-{os.getpid()}-{name}"
    cg = Cgroup(full)
    for ctrl in controllers:
        version, root = hierarchy_for(ctrl)
        if version == 2:
            _enable_v2(root, V2_CONTROLLERS_ALIASES.get(ctrl, ctrl))
        d = root / full
        if not d.exists():
            seq = j.record("cg_mkdir", {"path": str(d), "parent": str(root)}, f"cgroup {d}")
            d.mkdir()
            j.done(seq)
        cg.dirs[ctrl] = d
        cg.versions[ctrl] = version
    return cg


@undo_handler("cg_mkdir")
def _undo_cg_mkdir(a: dict[str, Any]) -> None:
    d = Path(a["path"])
    if not d.exists():
        return
    parent_procs = Path(a["parent"]) / "cgroup.procs"
    for attempt in range(100):
        for pid in (d / "cgroup.procs").read_text().split():
            try:
                parent_procs.write_text(pid)
            except OSError:
                pass  # exited meanwhile
        try:
            d.rmdir()
            return
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or attempt == 99:
                raise
            time.sleep(0.05)  # memcg offlining or a dying task still attached


def create_child(parent: Cgroup, name: str) -> Cgroup:
    """Create `name` inside a kvds-created group (on v2 with the parent's controllers enabled for it), so that a
    limit on the parent covers both children and protection (memory.low/min) divides it between them. Restore
    removes the child before its parent (the journal undoes in reverse) and moves what is left in it to the
    root: a v2 parent with children may hold no process."""
    j = get_journal()
    cg = Cgroup(f"{parent.name}/{name}")
    for ctrl, pdir in parent.dirs.items():
        version = parent.versions[ctrl]
        if version == 2:  # inside our own group: removing the group removes the setting
            ctl = pdir / "cgroup.subtree_control"
            wanted = V2_CONTROLLERS_ALIASES.get(ctrl, ctrl)
            if wanted not in ctl.read_text().split():
                ctl.write_text(f"+{wanted}")
        d = pdir / name
        if not d.exists():
            seq = j.record("cg_mkdir", {"path": str(d), "parent": str(pdir.parent)}, f"cgroup {d}")
            d.mkdir()
            j.done(seq)
        cg.dirs[ctrl] = d
        cg.versions[ctrl] = version
    return cg


__all__ = ["Cgroup", "create_child", "create_cgroup", "hierarchy_for", "mounts"]
