"""The guest lab's doctor probes (area "qemu", registered in pyproject.toml's `kvds.probes`): the emulator, its
accelerators, kernel sources and build tools (`kvds qemu ...`).

KVM is tried, not assumed: /dev/kvm may be a backend (such as PVM) that only runs patched guests, in which case
QEMU aborts while setting up the vCPU, or sets it up and then stops at the first instruction it cannot emulate
(boot/kvm_check.py boots a cached guest kernel to find out); the guest lab then falls back to TCG.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness.capability import Capability, available, unavailable
from qemu_validation.boot import kvm_check

AREA = "qemu"
QEMU = "qemu-system-x86_64"
TOOLS = ("gcc", "make", "flex", "bison", "bc", "ccache", "perl", "tar", "git")


def _accelerators(binary: str) -> set[str]:
    try:
        out = subprocess.run([binary, "-accel", "help"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.strip() for line in out.splitlines()[1:] if line.strip()}


def _kvm_starts(binary: str) -> tuple[bool, str]:
    """Start a paused KVM guest and ask its monitor to quit: the monitor answers only once the machine (and its
    vCPUs) are set up, so a backend that cannot run stock guests has failed by then. No timing involved: a
    2-second wait once read a loaded host's slow start as success, and a validate then aborted under KVM."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is missing or not accessible"
    argv = [binary, "-accel", "kvm", "-cpu", "host", "-S", "-nodefaults", "-no-user-config", "-display", "none",
            "-monitor", "stdio", "-serial", "none"]
    try:
        p = subprocess.run(argv, input="quit\n", capture_output=True, text=True, timeout=120)
    except OSError as exc:
        return False, f"cannot start {binary}: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return False, "QEMU with KVM did not answer its monitor within 120 s; TCG is used"
    if p.returncode == 0:
        return True, "a KVM vCPU with -cpu host starts"
    err = p.stderr.strip().splitlines()
    first = next((l for l in err if "error" in l.lower()), err[0] if err else f"exit {p.returncode}")
    return False, f"QEMU with KVM fails at vCPU setup ({first.strip()[:120]}); TCG is used"


def probes() -> list[Capability]:
    out: list[Capability] = []
    binary = shutil.which(QEMU)
    if binary is None:
        out.append(unavailable("qemu.binary", f"{QEMU} not found (Debian package qemu-system-x86)", AREA))
        out.append(unavailable("qemu.tcg", f"{QEMU} not found", AREA))
        out.append(unavailable("qemu.kvm", f"{QEMU} not found", AREA))
    else:
        out.append(available("qemu.binary", binary, AREA))
        accels = _accelerators(binary)
        out.append(available("qemu.tcg", "TCG software emulation (slow but everywhere)", AREA) if "tcg" in accels
                   else unavailable("qemu.tcg", f"{QEMU} lists no tcg accelerator", AREA))
        if "kvm" in accels:
            ok, why = _kvm_starts(binary)
            if ok:
                ok, why = kvm_check.runs_a_kernel(binary)
            out.append(Capability("qemu.kvm", "available" if ok else "unavailable", why, AREA))
        else:
            out.append(unavailable("qemu.kvm", f"{QEMU} was built without KVM", AREA))
    src = Path("/usr/src/linux-source-6.12.tar.xz")
    out.append(available("qemu.kernel-source", str(src), AREA) if src.exists()
               else unavailable("qemu.kernel-source", f"{src} missing (Debian package linux-source-6.12)", AREA))
    missing = [t for t in TOOLS if shutil.which(t) is None]
    bb = next((p for p in ("/bin/busybox", "/usr/bin/busybox") if Path(p).exists()), None)
    if bb is None:
        missing.append("busybox")
    if not Path("/usr/lib/x86_64-linux-gnu/libc.a").exists():
        missing.append("libc.a (static glibc, libc6-dev)")
    out.append(available("qemu.build-tools", "compiler, kbuild tools, ccache, static busybox and libc", AREA)
               if not missing else unavailable("qemu.build-tools", "missing: " + ", ".join(missing), AREA))
    ok = all(c.ok for c in out if c.name in ("qemu.tcg", "qemu.kernel-source", "qemu.build-tools"))
    out.append(available("qemu.guest", "can build and boot the guest kernel", AREA) if ok
               else unavailable("qemu.guest", "needs qemu.tcg, qemu.kernel-source and qemu.build-tools", AREA))
    return out
