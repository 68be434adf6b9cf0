"""The environment recorded with every result, so runs can be compared across hosts and kernels."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from harness.paths import repo_root

PACKAGES = ("kvds", "numpy", "psutil", "pyroute2", "fabric", "rich", "matplotlib")


def git_revision() -> str:
    """kvds's own revision, with '-dirty' when the tree has uncommitted changes."""
    root = repo_root()
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip()
        if not rev:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    out["python"] = platform.python_version()
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CLOCK_PARAM = "kvds.clock="
"""The kernel command-line word a QEMU guest boots with under `-icount` (qemu_validation/boot/guest_command.machine); a
dotted word the kernel ignores, so only /proc/cmdline carries it."""
ICOUNT_MAX_SHIFT = 10  # QEMU's limit for a fixed -icount shift


def icount_shift(text: str) -> int:
    """An -icount SHIFT as given on a command line or in KVDS_GUEST_CLOCK; ValueError unless 0..ICOUNT_MAX_SHIFT."""
    if not text.isdigit() or int(text) > ICOUNT_MAX_SHIFT:
        raise ValueError(f"expected a shift 0..{ICOUNT_MAX_SHIFT}, got {text!r}")
    return int(text)


def clock(cmdline: str | None = None) -> str:
    """What this machine's timings measure: "wall" (real time), or "icount:N" in a QEMU guest booted with
    instruction-count time (each guest instruction 2**N ns; host stalls do not appear in guest time)."""
    if cmdline is None:
        try:
            cmdline = Path("/proc/cmdline").read_text()
        except OSError:
            return "wall"
    word = next((w for w in cmdline.split() if w.startswith(CLOCK_PARAM)), None)
    return word[len(CLOCK_PARAM):] if word else "wall"


def capture(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Host, kernel, CPU, memory, load, kvds revision, package versions, command line and time."""
    u = os.uname()
    env = {
        "host": socket.gethostname(),
        "kernel": u.release,
        "kernel_version": u.version,
        "arch": u.machine,
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": psutil.virtual_memory().total,
        "loadavg": list(os.getloadavg()),
        "clock": clock(),
        "kvds_revision": git_revision(),
        "packages": package_versions(),
        "argv": sys.argv,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "unix_time": time.time(),
    }
    if extra:
        env.update(extra)
    return env
