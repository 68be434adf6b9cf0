"""After `kvds io bench` the loop device, its scheduler and scratch files are gone: on a normal exit, and after
SIGKILL followed by `kvds restore`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import doctor

pytestmark = [doctor.skip_unless("loop", "ioprio"),
              pytest.mark.skipif(not doctor.is_root(), reason="needs root (loop devices)")]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "KVDS_WORK_DIR": str(tmp_path / "work"), "KVDS_STATE_DIR": str(tmp_path / "state"),
            "KVDS_RESULTS_DIR": str(tmp_path / "results"), "KVDS_NO_PROGRESS": "1"}


def _loops_over(tmp_path: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if str(tmp_path) in line]


def _kvds(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def test_normal_run_leaves_nothing(tmp_path: Path) -> None:
    res = subprocess.run(_kvds("io", "bench", "--mode", "unloaded,separated", "--scheduler", "bfq", "--duration",
                               "0.5", "--reps", "1", "--kv-mib", "16", "--spill-mib", "32", "--json"),
                         capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["config"]["scheduler"] == "bfq"
    assert doc["modes"]["separated"]["reads"] > 0
    assert Path(doc["run"], "samples", "unloaded.npy").exists()
    assert _loops_over(tmp_path) == []
    assert not any((tmp_path / "work").glob("io-*"))
    assert not any((tmp_path / "state" / "journal").glob("*.jsonl"))


def test_sigkill_then_restore(tmp_path: Path) -> None:
    env = _env(tmp_path)
    proc = subprocess.Popen(_kvds("io", "bench", "--mode", "baseline", "--duration", "30", "--reps", "1",
                                  "--kv-mib", "16", "--spill-mib", "32", "--scheduler", "kyber"),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        loops: list[str] = []
        while time.monotonic() < deadline and not loops:
            time.sleep(0.2)
            loops = _loops_over(tmp_path)
        assert loops, "the benchmark never attached its loop device"
        sched = Path(f"/sys/block/{Path(loops[0]).name}/queue/scheduler")
        while time.monotonic() < deadline and "[kyber]" not in sched.read_text():
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the benchmark and its ioload children (its own session)
        proc.wait()
    assert _loops_over(tmp_path), "the loop device should outlive a SIGKILLed benchmark until restore"
    res = subprocess.run(_kvds("restore"), capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert _loops_over(tmp_path) == []
    assert not any((tmp_path / "work").glob("io-*"))
