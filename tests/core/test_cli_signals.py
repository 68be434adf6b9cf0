"""Ctrl-C and SIGTERM on a real experiment: the CLI restores every knob and exits 130 / 143."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import doctor
from tests.conftest import KVDS, REPO, foreground_signals, journals_of, needs_root

pytestmark = [needs_root, doctor.skip_unless("loop", "ioprio")]


def _loops_over(path: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if str(path) in line]


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_run_restores_and_exits(tmp_path, kvds_env, signum: int, status: int) -> None:
    proc = subprocess.Popen([*KVDS, "io", "bench", "--mode", "unloaded,baseline", "--duration", "30", "--reps", "1",
                             "--kv-mib", "16", "--spill-mib", "32"], cwd=REPO, env=kvds_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=foreground_signals)
    deadline = time.monotonic() + 120
    while not _loops_over(tmp_path) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _loops_over(tmp_path), "the bench never attached its loop device"
    time.sleep(1.0)
    proc.send_signal(signum)  # to kvds only, as a terminal's Ctrl-C would reach its foreground process
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err[-2000:]
    assert "restoring kernel state" in err
    assert _loops_over(tmp_path) == []
    assert journals_of(proc.pid) == []
