"""Does a guest kernel run under this host's KVM? Answered by booting one, not by starting a paused vCPU.

A KVM backend may set up a `-cpu host` vCPU and still fail on the first instruction it cannot emulate: on this
host (2026-12-02) a paused guest quit cleanly while every real boot stopped at "KVM internal error. Suberror: 1"
(a `lock cmpxchg16b` in the guest kernel) and QEMU then sat paused until the run's timeout. So the doctor boots
the newest cached lab kernel once, without an initramfs (it panics for want of a root, QEMU exits under
-no-reboot), and reads the answer from how QEMU ended. The answer is cached per (QEMU binary, host kernel), so
the boot is paid once, not per kernel a rebuild-time makes; with no kernel built yet, KVM is not used."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from harness import atomic
from qemu_validation.boot.guest_command import DEFAULT_SPEC
from harness.errors import UserError
from qemu_validation.kernel import build, cachedirs

KVM_FAILURE = "KVM internal error"
BOOT_TIMEOUT_S = 180.0     # a KASAN kernel's boot to its root-less panic, on a loaded 2-CPU host
POLL_S = 0.5


def _cache_file() -> Path:
    return cachedirs.root() / "kvm-check.json"


def _key(binary: str) -> str:
    st = os.stat(binary)
    return hashlib.sha256(f"{binary}:{st.st_size}:{st.st_mtime_ns}:{os.uname().release}".encode()).hexdigest()[:16]


def runs_a_kernel(binary: str) -> tuple[bool, str]:
    """(ok, why): whether the newest cached guest kernel boots under KVM with -cpu host (cached answer)."""
    builds = sorted(build.all_builds(), key=lambda b: b.info.get("built_at", 0))
    try:
        default = build.cached(DEFAULT_SPEC)   # the lab's default kernel first
    except UserError:  # this kvds has no patch series to name it by (a copy shipped to a remote host)
        default = None
    kb = default or (builds[-1] if builds else None)
    if kb is None:
        return False, "no guest kernel is built yet to try KVM with (kvds qemu build --kasan); TCG is used"
    key = _key(binary)
    cache = _cache_file()
    known = json.loads(cache.read_text()) if cache.exists() else {}
    if key not in known:
        ok, why = _boot(binary, kb)
        known[key] = {"ok": ok, "why": why, "kernel": kb.id, "checked_at": time.time()}
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(cache, known)
    return bool(known[key]["ok"]), str(known[key]["why"])


def _boot(binary: str, kb: build.KernelBuild) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="kvds-kvm-check-") as tmp:
        out = Path(tmp) / "qemu.out"
        argv = [binary, "-machine", "q35", "-accel", "kvm", "-cpu", "host", "-m", "512M", "-smp", "1",
                "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none", "-monitor", "none",
                "-serial", "stdio", "-kernel", str(kb.bzimage), "-append", "console=ttyS0 panic=-1 loglevel=4"]
        with open(out, "wb") as fh:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if KVM_FAILURE.encode() in out.read_bytes():
                    return False, f"a guest kernel ({kb.id}) stops under KVM: {KVM_FAILURE}; TCG is used"
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        text = out.read_bytes().decode(errors="replace")
    if KVM_FAILURE in text:
        return False, f"a guest kernel ({kb.id}) stops under KVM: {KVM_FAILURE}; TCG is used"
    if "Kernel panic" not in text:
        return False, (f"a guest kernel ({kb.id}) did not finish booting under KVM in {BOOT_TIMEOUT_S:.0f} s; "
                       "TCG is used")
    return True, f"a KVM vCPU with -cpu host boots guest kernel {kb.id}"
