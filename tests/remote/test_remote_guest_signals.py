"""SIGINT / SIGTERM on a `--target guest` command: kvds kills the QEMU guest its worker thread waits on and exits with
the signal's status, instead of waiting (in the thread pool's shutdown) for the guest to finish its command."""

from __future__ import annotations

import signal
import subprocess
import time

import psutil
import pytest

from harness import doctor
from tests.conftest import KVDS, REPO, foreground_signals, journals_of

# the guest's command measures for 20 minutes: a kvds that waited for it would run into the test's timeout
GUEST_COMMAND = ["remote", "baseline", "--duration", "1200", "--file-mib", "4", "--target", "guest"]
BOOT_WAIT_S = 600.0  # building the initramfs and starting QEMU, on a loaded 2-core host
EXIT_WAIT_S = 300.0  # generous: only a kvds that waits for the guest's command runs into it


def _booting(p: psutil.Process) -> bool:
    """A QEMU that boots a kernel: not the short `qemu-system-x86_64 -accel help` probe kvds runs first, which a
    loaded host keeps alive long enough for the poll below to catch."""
    try:
        return p.name().startswith("qemu-system") and "-kernel" in p.cmdline()
    except psutil.NoSuchProcess:
        return False


def _qemu_under(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in kids if _booting(p)]


def _running(p: psutil.Process) -> bool:
    """Same pid and start time, and not a zombie (never a stranger that reused the pid)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@doctor.skip_unless("qemu.guest")
@pytest.mark.timeout(BOOT_WAIT_S + EXIT_WAIT_S + 120)
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_boot_kills_the_guest_and_exits_with_its_status(kvds_env: dict[str, str], signum: int,
                                                                       status: int) -> None:
    proc = subprocess.Popen([*KVDS, *GUEST_COMMAND], cwd=REPO, env=kvds_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=foreground_signals)
    try:
        deadline = time.monotonic() + BOOT_WAIT_S
        qemu: list[psutil.Process] = []
        while not qemu and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            qemu = _qemu_under(proc.pid)
        assert len(qemu) == 1, f"no guest started (kvds exit {proc.poll()})"
        time.sleep(2.0)  # mid-boot
        assert _running(qemu[0])
        proc.send_signal(signum)  # to kvds only: QEMU ends only if kvds ends it
        out, err = proc.communicate(timeout=EXIT_WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err[-2000:]
    assert "restoring kernel state" in err, err[-2000:]
    assert not _running(qemu[0]), f"QEMU (pid {qemu[0].pid}) outlived kvds"
    assert journals_of(proc.pid) == []
