"""Loop devices over files kvds created: the default experiment device (never the root disk)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from harness.journal import get_journal, undo_handler


def _devices_for(backing: str) -> list[str]:
    out = subprocess.run(["losetup", "-j", backing, "-O", "NAME", "-n"], capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def loop_attach(backing_file: str | Path, direct_io: bool = True) -> str:
    """Attach a loop device to a file; returns "/dev/loopN". Restore detaches it."""
    backing = str(Path(backing_file).resolve())
    j = get_journal()
    seq = j.record("loop", {"backing": backing}, f"loop device on {backing}")
    cmd = ["losetup", "--find", "--show", f"--direct-io={'on' if direct_io else 'off'}", backing]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise OSError(f"losetup failed: {res.stderr.strip()}")
    dev = res.stdout.strip()
    j.done(seq, device=dev)
    j.owned_devices.add(Path(dev).name)
    return dev


def loop_detach(dev: str) -> None:
    subprocess.run(["losetup", "-d", dev], capture_output=True, text=True, check=False)


@undo_handler("loop")
def _undo_loop(a: dict[str, Any]) -> None:
    # By backing file, so a device attached just before a crash (not yet named in the journal) goes too.
    for dev in set(_devices_for(a["backing"])) | ({a["device"]} if a.get("device") else set()):
        if Path(dev).exists():
            res = subprocess.run(["losetup", "-d", dev], capture_output=True, text=True)
            if res.returncode != 0 and "No such device" not in res.stderr and dev in _devices_for(a["backing"]):
                raise OSError(f"losetup -d {dev}: {res.stderr.strip()}")
