"""Run a command inside the guest kernel: the API other tracks call for `--target guest`.

    from qemu_validation.boot.guest_command import run_for_status
    status = run_for_status(None, ["sh", "-c", "cat /sys/kernel/mm/lru_gen/enabled > /share/out"], share_dir)

`share_dir` is a host directory mounted read-write at /share in the guest (9p), so results written there land
back on the host. With host_root=True the guest chroots into the host's root (mounted read-only over 9p), the
share appears at its own host path, and host tools (the kvds venv, python) run unchanged inside the guest kernel.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from harness import doctor
from harness.environment import CLOCK_PARAM
from harness.errors import Unavailable, UserError
from harness.paths import repo_root
from harness.progress import say
from qemu_validation.boot import initramfs, qemu_cmd, runner
from qemu_validation.kernel import build, cachedirs

# The kernel a run boots when none is named: mm_intent with KASAN and lockdep (the one `validate` uses), so one
# build serves every test and experiment.
DEFAULT_SPEC = build.BuildSpec(kasan=True)
TIMEOUT_STATUS = 124         # like timeout(1)
KERNEL_FAILURE_STATUS = 125  # splat on the console, or no status reported (panic)


def exit_status(res: runner.BootResult) -> int:
    """The guest command's exit status; 124 on a timeout, 125 when the kernel splatted or never reported."""
    if res.timed_out:
        return TIMEOUT_STATUS
    if res.findings or res.status is None:
        return KERNEL_FAILURE_STATUS
    return res.status


def kernel_build(kernel_id: str | None) -> build.KernelBuild:
    """The named build, or the default debug kernel (built on first use, a no-op afterwards)."""
    if kernel_id is None:
        return build.ensure_built(DEFAULT_SPEC, say=say)
    return build.find(kernel_id)


def accelerator(icount: bool = False) -> str:
    """KVM when the doctor finds it usable, else TCG; always TCG under instruction-count time, which only TCG
    has (QEMU's -icount)."""
    if not icount and doctor.capability("qemu.kvm").ok:
        return "kvm"
    doctor.require("qemu.tcg")
    return "tcg"


def boot_and_run(kernel_id: str | None, argv: list[str], share_dir: Path | None = None, *, timeout: float = 600,
                 host_root: bool = False, files: dict[str, Path] | None = None, cwd: str | None = None,
                 memory_mb: int = 1024, cpus: int = 1, extra_append: tuple[str, ...] = (),
                 log_dir: Path | None = None, cpu: str | None = None,
                 icount_shift: int | None = None, icount_warp: bool = False) -> runner.BootResult:
    """Boot the kernel, run argv, and return everything known about the run (status, console, findings)."""
    if not argv:
        raise UserError("no command to run in the guest")
    if share_dir is not None:
        share_dir = Path(share_dir).resolve()
        if not share_dir.is_dir():
            raise UserError(f"share directory {share_dir} does not exist")
    kb = kernel_build(kernel_id)
    if log_dir is None:
        log_dir = cachedirs.root() / "runs" / time.strftime("%Y%m%d-%H%M%S")
        log_dir.mkdir(parents=True, exist_ok=True)
        log_dir = Path(tempfile.mkdtemp(dir=log_dir, prefix=f"{kb.id[:8]}-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    if cwd is None:
        cwd = os.getcwd() if host_root else (initramfs.GUEST_SHARE if share_dir else "/")
    # Under host_root the guest's /tmp is its own tmpfs: a checkout or venv under the host's /tmp is bound back.
    keep = (str(repo_root()), sys.prefix, os.path.abspath(argv[0])) if host_root else ()
    initramfs.build(log_dir / "initramfs.cpio", list(argv), files, share=share_dir, host_root=host_root, cwd=cwd,
                    keep=keep)
    return runner.boot(machine(kb.bzimage, log_dir, share_dir, host_root=host_root, memory_mb=memory_mb, cpus=cpus,
                               extra_append=extra_append, cpu=cpu, icount_shift=icount_shift,
                               icount_warp=icount_warp), timeout)


def machine(bzimage: Path, log_dir: Path, share_dir: Path | None = None, *, host_root: bool = False,
            memory_mb: int = 1024, cpus: int = 1, extra_append: tuple[str, ...] = (),
            cpu: str | None = None, icount_shift: int | None = None,
            icount_warp: bool = False) -> qemu_cmd.Machine:
    """The machine a guest run boots (its initramfs and console log in log_dir); reads the host, changes nothing,
    so `kvds qemu run --dry-run` prints the very command a run would start. Under icount the kernel command line
    names the clock (`kvds.clock=icount:N`), so a kvds inside records it with every result."""
    if icount_shift is not None:
        extra_append = (*extra_append, f"{CLOCK_PARAM}icount{'-warp' if icount_warp else ''}:{icount_shift}")
    return qemu_cmd.Machine(kernel=bzimage, initramfs=log_dir / "initramfs.cpio", console_log=log_dir / "console.log",
                            accel=accelerator(icount_shift is not None), memory_mb=memory_mb, cpus=cpus,
                            share_dir=share_dir, host_root=host_root, extra_append=tuple(extra_append), cpu=cpu,
                            tsc_khz=qemu_cmd.host_tsc_khz(Path("/proc/cpuinfo").read_text()),
                            icount_shift=icount_shift, icount_warp=icount_warp)


def run_for_status(kernel_id: str | None, argv: list[str], share_dir: Path | None = None, **kw) -> int:
    """The guest command's exit status; 124 on a timeout, 125 when the kernel splatted or never reported."""
    res = boot_and_run(kernel_id, argv, share_dir, **kw)
    why = res.failure
    if why:
        print(f"kvds: guest: {why}", file=sys.stderr)
    return exit_status(res)


__all__ = ["boot_and_run", "run_for_status", "kernel_build", "DEFAULT_SPEC", "Unavailable"]
