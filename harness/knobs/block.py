"""Block-device I/O schedulers, only on devices kvds created."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UserError
from harness.journal import get_journal
from harness.knobs.files import read_knob, write_knob
from harness.knobs.guards import check_scheduler_change, device_name


def _sched_path(dev: str) -> Path:
    return Path("/sys/block") / device_name(dev) / "queue" / "scheduler"


def scheduler_of(dev: str) -> str:
    return read_knob(_sched_path(dev))


def available_schedulers(dev: str) -> list[str]:
    return _sched_path(dev).read_text().replace("[", "").replace("]", "").split()


def set_scheduler(dev: str, name: str) -> str:
    """Select an I/O scheduler on a device kvds owns; returns the previous one."""
    check_scheduler_change(dev, get_journal().owned_devices)
    avail = available_schedulers(dev)
    if name not in avail:
        raise UserError(f"scheduler {name!r} is not available on {device_name(dev)} (available: {', '.join(avail)})")
    return write_knob(_sched_path(dev), name)
