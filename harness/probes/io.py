"""Block I/O mechanisms: ioprio classes, io_uring, loop devices, schedulers, blkio throttling, fio.

The I/O track adds its own row to this area (io.ioload, io_priority/probe.py, through `kvds.probes`)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from pathlib import Path

from harness.capability import Capability, available, unavailable
from harness.ioprio import CLASS_BE, CLASS_IDLE, CLASS_RT, IoPrio, get_ioprio, set_ioprio

AREA = "io"
NR_IO_URING_SETUP = 425


def _try_ioprio(prio: IoPrio) -> str | None:
    """Set a priority on a short-lived thread (never on the prober itself); None on success."""
    result: list[str | None] = [None]

    def body() -> None:
        try:
            set_ioprio(prio)
            got = get_ioprio()
            if got != prio:
                result[0] = f"ioprio_get returned {got} after setting {prio}"
        except OSError as exc:
            result[0] = str(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return result[0]


def _io_uring() -> str | None:
    libc = ctypes.CDLL(None, use_errno=True)
    params = (ctypes.c_uint8 * 120)()
    fd = libc.syscall(NR_IO_URING_SETUP, 4, params)
    if fd < 0:
        err = ctypes.get_errno()
        return f"io_uring_setup: {os.strerror(err)}"
    os.close(fd)
    return None


def _blkio_throttle() -> Capability:
    v1 = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device")
    if v1.exists():
        return available("blkio.throttle", "cgroup v1 blkio.throttle.write_bps_device", AREA)
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        try:
            if "io" in (root / "cgroup.controllers").read_text().split():
                return available("blkio.throttle", f"cgroup v2 io.max under {root}", AREA)
        except OSError:
            continue
    return unavailable("blkio.throttle", "neither v1 blkio throttling nor a v2 io controller is mounted", AREA)


def _schedulers() -> Capability:
    for dev in sorted(Path("/sys/block").iterdir()):
        f = dev / "queue" / "scheduler"
        if f.exists() and dev.name.startswith(("loop", "vd", "sd", "nvme")):
            names = f.read_text().replace("[", "").replace("]", "").split()
            return available("blk.schedulers", " ".join(names) + f" (read from {dev.name})", AREA)
    return unavailable("blk.schedulers", "no block device exposes queue/scheduler", AREA)


def _fio() -> Capability:
    exe = shutil.which("fio")
    if not exe:
        return unavailable("fio", "fio is not installed (Debian package fio)", AREA)
    ver = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return available("fio", f"{ver} at {exe}", AREA)


def probes() -> list[Capability]:
    out = []
    err = _try_ioprio(IoPrio(CLASS_BE, 4))
    out.append(available("ioprio", "ioprio_set/get on a thread work", AREA) if err is None
               else unavailable("ioprio", err, AREA))
    err = _try_ioprio(IoPrio(CLASS_RT, 0))
    if err is None:
        out.append(available("ioprio.rt", "realtime class settable (CAP_SYS_ADMIN)", AREA))
    elif os.geteuid() != 0:
        out.append(Capability("ioprio.rt", "needs-root", f"realtime class needs CAP_SYS_ADMIN: {err}", AREA))
    else:
        out.append(unavailable("ioprio.rt", err, AREA))
    err = _try_ioprio(IoPrio(CLASS_IDLE, 0))
    out.append(available("ioprio.idle", "idle class settable", AREA) if err is None
               else unavailable("ioprio.idle", err, AREA))
    err = _io_uring()
    out.append(available("io_uring", "io_uring_setup works; per-SQE ioprio is part of the ABI", AREA)
               if err is None else unavailable("io_uring", err, AREA))
    if Path("/dev/loop-control").exists() and shutil.which("losetup"):
        out.append(available("loop", "/dev/loop-control and losetup present", AREA) if os.geteuid() == 0
                   else Capability("loop", "needs-root", "attaching loop devices needs root", AREA))
    else:
        out.append(unavailable("loop", "no /dev/loop-control (CONFIG_BLK_DEV_LOOP off) or no losetup", AREA))
    out.append(_schedulers())
    out.append(_blkio_throttle())
    out.append(_fio())
    return out
