"""Host basics: privileges, lockdown, kernel configuration, pressure stall information."""

from __future__ import annotations

import os
from pathlib import Path

from harness.capability import Capability, available, unavailable
from harness.kconfig import kernel_config

AREA = "system"


def probes() -> list[Capability]:
    out = []
    if os.geteuid() == 0:
        out.append(available("root", "running as root", AREA))
    else:
        out.append(Capability("root", "needs-root", "kvds changes kernel state; run it as root", AREA))
    cfg = kernel_config()
    out.append(
        available("kernel.config", "/proc/config.gz or /boot/config readable", AREA)
        if cfg is not None
        else unavailable("kernel.config", "the kernel publishes no config; probes fall back to trying", AREA)
    )
    try:
        lock = Path("/sys/kernel/security/lockdown").read_text().strip()
        mode = lock[lock.index("[") + 1 : lock.index("]")]
        out.append(available("lockdown", f"lockdown mode: {mode}", AREA) if mode == "none"
                   else unavailable("lockdown", f"kernel is locked down ({mode}): unsigned modules and some BPF helpers refused", AREA))
    except (OSError, ValueError):
        state = "securityfs not mounted" if not Path("/sys/kernel/security/lsm").exists() else "no lockdown LSM"
        out.append(available("lockdown", f"lockdown state not readable ({state}); nothing kvds does needs it off", AREA))
    psi = Path("/proc/pressure/memory")
    try:
        psi.read_text()
        out.append(available("psi", "/proc/pressure/{cpu,io,memory} readable", AREA))
    except OSError as exc:
        out.append(unavailable("psi", f"/proc/pressure/memory: {exc.strerror} (CONFIG_PSI off or psi=0)", AREA))
    return out
