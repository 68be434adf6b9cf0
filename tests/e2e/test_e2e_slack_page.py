"""The decode loop drives spill scheduler v2 through e2e/slack_page.py, ioload's shared page written from Python:
while a step is in flight the deadline writer submits nothing; when steps end with slack before the next one is due,
it writes. A regular scratch file stands in for the device (no kernel state changes)."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from io_priority import ioload_launch
from e2e.slack_page import SlackPage

STEP_NS = 20_000_000


def _writer(tmp_path: Path, shm: Path, ms: int) -> subprocess.Popen[str]:
    dev = tmp_path / "spill.img"
    with open(dev, "wb") as f:
        f.truncate(64 << 20)
    argv = ioload_launch.command("writer", ["--dev", str(dev), "--engine", "psync", "--bs", str(1 << 20), "--off", "0",
                                            "--len", str(64 << 20), "--qd", "2", "--duration-ms", str(ms),
                                            "--prio", "-1", "--shm", str(shm), "--pace", "deadline",
                                            "--bs-min", str(128 << 10), "--model-q", "0.95"], ioload_launch.build())
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _run(tmp_path: Path, steps_end: bool) -> dict:
    shm = tmp_path / "slack"
    shm.write_bytes(bytes(4096))
    page = SlackPage(shm, STEP_NS)
    page.step_begin()  # a step in flight before the writer starts
    p = _writer(tmp_path, shm, 1200)
    assert p.stdin is not None
    p.stdin.write(f"go {time.monotonic_ns()}\n")
    p.stdin.flush()
    end = time.monotonic() + 1.4
    while time.monotonic() < end:
        if steps_end:
            page.step_end(time.monotonic_ns() + STEP_NS)
            time.sleep(STEP_NS / 1e9)
            page.step_begin()
            time.sleep(0.002)  # the step's reads
            continue
        time.sleep(0.05)
    out, err = p.communicate(timeout=30)
    page.close()
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_step_in_flight_holds_the_spill_back(tmp_path: Path) -> None:
    res = _run(tmp_path, steps_end=False)
    assert res["bytes"] == 0 and res["batches"] == 0, res


def test_steps_with_slack_let_the_spill_through(tmp_path: Path) -> None:
    res = _run(tmp_path, steps_end=True)
    assert res["bytes"] > 0 and res["batches"] > 0, res
