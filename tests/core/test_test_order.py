"""The suite's own plumbing (tests/background_build.py): guest tests run after every host test, so a debug
kernel building in the background has the host tests' time to finish; a background build is stopped with its
process group when the session ends first."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.background_build import BackgroundBuild
from tests.conftest import REPO


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_guest_tests_come_after_every_host_test() -> None:
    order = _collected("-m", "not slow", "tests")
    guests = set(_collected("-m", "not slow and guest", "tests"))
    assert guests and len(guests) < len(order)
    first_guest = min(i for i, nodeid in enumerate(order) if nodeid in guests)
    assert set(order[first_guest:]) == guests, [n for n in order[first_guest:] if n not in guests][:5]


def test_a_background_build_is_stopped_with_its_children(tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    bb = BackgroundBuild(["sh", "-c", f"sleep 1000 & echo $! > {child}; wait"], tmp_path / "build.log")
    while not child.exists() or not child.read_text().strip():
        time.sleep(0.05)
    pid = int(child.read_text())
    bb.stop()
    assert bb.proc.poll() is not None
    # SIGKILL is sent to the whole group; the grandchild dies when it next runs (on a loaded host a moment later)
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for its reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_wait_reports_how_the_build_ended(tmp_path: Path) -> None:
    bb = BackgroundBuild(["sh", "-c", "echo building; exit 3"], tmp_path / "build.log")
    said: list[str] = []
    bb.wait(said.append)
    assert "status 3" in said[-1] and (tmp_path / "build.log").read_text() == "building\n"
