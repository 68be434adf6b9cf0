"""null_blk devices kvds creates through configfs: a block device whose service time kvds sets (timer
completions after `completion_nsec`, a bandwidth in `service_mbps` (kernel_patches/io_model: each request's bytes
move one request at a time, in arrival order) or null_blk's own token-bucket cap `mbps`, a queue depth and number of
submit queues).

The device is created under /sys/kernel/config/nullb/<name> (configfs mounted through the journal when it is not)
and powered on; restore powers it off and removes the directory, so a killed run leaves no device behind. Writes
are discarded and reads return no stored data (memory_backed=0): what the device models is time, not content.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import Any, Mapping

from harness.errors import Unavailable, UserError
from harness.journal import get_journal, undo_handler
from harness.knobs.mounts import mount

CONFIGFS = "/sys/kernel/config"
NULLB_ROOT = Path(CONFIGFS) / "nullb"
SETTINGS = ("size", "blocksize", "queue_mode", "irqmode", "completion_nsec", "hw_queue_depth", "submit_queues",
            "mbps", "service_mbps", "memory_backed")
"""The configfs attributes kvds sets, in this order (each must be written before `power`)."""


def _write(path: Path, value: str | int) -> None:
    with open(path, "w") as fh:
        fh.write(str(value))


def available() -> tuple[bool, str]:
    """Whether this kernel can create null_blk devices through configfs (after configfs is mounted)."""
    if not Path("/sys/module/null_blk").exists():
        return False, "the kernel has no null_blk (CONFIG_BLK_DEV_NULL_BLK is not set, or the module is not loaded)"
    if not NULLB_ROOT.is_dir():
        return False, f"{NULLB_ROOT} does not exist (configfs is not mounted, or null_blk has no configfs support)"
    return True, f"{NULLB_ROOT}"


def _device_path(item: Path) -> str:
    """The block device a powered-on configfs item became: /dev/<item name> on kernels that name the disk after
    the item (6.x), else /dev/nullb<index>."""
    for name in (item.name, f"nullb{(item / 'index').read_text().strip()}"):
        if Path("/sys/block", name).exists():
            dev = f"/dev/{name}"
            for _ in range(200):  # devtmpfs creates the node asynchronously
                if os.path.exists(dev):
                    return dev
                time.sleep(0.01)
            raise OSError(f"{dev} did not appear after power=1")
    raise OSError(f"null_blk item {item.name} powered on but no /sys/block entry appeared")


def create_nullb(name: str, settings: Mapping[str, int]) -> str:
    """Create and power on null_blk device `name` with `settings` (configfs attribute -> value, SETTINGS order);
    returns its /dev path. Restore powers it off and removes it."""
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise UserError(f"null_blk: unknown setting(s) {', '.join(sorted(unknown))} (known: {', '.join(SETTINGS)})")
    if not Path("/sys/module/null_blk").exists():
        raise Unavailable("null_blk: CONFIG_BLK_DEV_NULL_BLK is not set in this kernel")
    if not NULLB_ROOT.is_dir():
        mount("configfs", CONFIGFS)
    ok, why = available()
    if not ok:
        raise Unavailable(f"null_blk: {why}")
    item = NULLB_ROOT / name
    j = get_journal()
    seq = j.record("nullb", {"item": str(item)}, f"null_blk device {name}")
    try:
        item.mkdir()
    except FileExistsError:
        raise UserError(f"null_blk: {item} already exists (another run's device?)") from None
    missing = [key for key in settings if not (item / key).exists()]
    if missing:  # the item is journaled: restore removes it
        raise Unavailable(f"null_blk in this kernel has no {', '.join(missing)} setting (service_mbps comes from "
                          "kernel_patches/io_model)")
    for key in SETTINGS:
        if key in settings:
            _write(item / key, settings[key])
    _write(item / "power", 1)
    dev = _device_path(item)
    j.done(seq, device=dev)
    j.owned_devices.add(Path(dev).name)
    return dev


@undo_handler("nullb")
def _undo_nullb(a: dict[str, Any]) -> None:
    item = Path(a["item"])
    if not item.exists():
        return
    try:
        if (item / "power").read_text().strip() == "1":
            _write(item / "power", 0)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
    item.rmdir()
