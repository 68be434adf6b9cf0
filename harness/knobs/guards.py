"""What kvds must never touch: the machine's own disk and a DAMON kdamond somebody else runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.errors import KnobRefused

DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin")


def _disk_of(devname: str) -> str:
    """Whole-disk name of a block device or partition name ("vda1" -> "vda")."""
    sys_path = Path("/sys/class/block") / devname
    if (sys_path / "partition").exists():
        return sys_path.resolve().parent.name
    return devname


def root_disks() -> set[str]:
    """Disks that hold a mounted filesystem kvds did not create (at least the root filesystem's disk)."""
    disks = {"vda"} if Path("/sys/block/vda").exists() else set()
    try:
        st = os.stat("/")
        for dev in Path("/sys/class/block").iterdir():
            try:
                if (dev / "dev").read_text().strip() == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}":
                    disks.add(_disk_of(dev.name))
            except OSError:
                continue
    except OSError:
        pass
    return disks


def device_name(dev: str) -> str:
    """'/dev/loop3' or 'loop3' -> 'loop3'."""
    return Path(dev).name


def check_scheduler_change(dev: str, owned: set[str]) -> None:
    name = device_name(dev)
    if _disk_of(name) in root_disks():
        raise KnobRefused(f"refusing to change the I/O scheduler of {name}: it holds this machine's root filesystem")
    if name not in owned:
        raise KnobRefused(f"refusing to change the I/O scheduler of {name}: kvds did not create that device")


def foreign_kdamonds(owned: set[int]) -> list[int]:
    """Indices of running kdamonds that this process did not start."""
    base = DAMON_ADMIN / "kdamonds"
    out = []
    if not base.is_dir():
        return out
    for d in base.iterdir():
        if d.name.isdigit():
            try:
                if (d / "state").read_text().strip() == "on" and int(d.name) not in owned:
                    out.append(int(d.name))
            except OSError:
                continue
    return sorted(out)


_KDAMOND_PATH = re.compile(r"^/sys/kernel/mm/damon/admin/kdamonds/(\d+)(/|$)")


def check_write(path: str, owned_kdamonds: set[int]) -> None:
    """Refuse writes that would reconfigure the root disk or a DAMON kdamond kvds did not start."""
    real = os.path.realpath(path)
    m = re.match(r"^/sys/(?:devices/.*/block|block|class/block)/([^/]+)/queue/scheduler$", real)
    if m and _disk_of(m.group(1)) in root_disks():
        raise KnobRefused(f"refusing to write {path}: the root disk's scheduler is not kvds's to change")
    if real.startswith(str(DAMON_ADMIN)):
        m = _KDAMOND_PATH.match(real)
        if m and int(m.group(1)) not in owned_kdamonds:
            raise KnobRefused(f"refusing to write {path}: kdamond {m.group(1)} was not started by kvds")
        if not m:
            foreign = foreign_kdamonds(owned_kdamonds)
            if foreign:
                raise KnobRefused(
                    f"refusing to write {path}: kdamond {foreign[0]} is running under another owner"
                )
