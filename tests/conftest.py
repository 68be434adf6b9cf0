"""Shared fixtures: isolated results/scratch directories per test, journals where `kvds restore` finds them, and a
way to run the real `kvds` CLI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import doctor
from harness.paths import state_dir

REPO = Path(__file__).resolve().parent.parent
KVDS = [sys.executable, "-m", "harness.cli"]
SEED_TRACE = REPO / "tests" / "data" / "seed_trace_deadline_pressure_sample.jsonl"  # origin: tests/data/README.md


# Journals stay where `kvds restore` looks (pytest deletes tmp_path): a test run killed mid-test leaves them for
# the next `kvds restore`, or for the next test session, which restores them at its start.
STATE_DIR = state_dir()


def journals_of(pid: int) -> list[Path]:
    """The journals a kvds process (pid) left in the state directory (none once it restored everything)."""
    return sorted((STATE_DIR / "journal").glob(f"{pid}-*.jsonl"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Restore what an earlier, killed test run (or any dead kvds process) left changed, and say so."""
    if os.geteuid() != 0:
        return
    from harness import journal

    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    for rep in journal.restore_orphans():
        lines = [f"kvds: restored orphaned journal {rep.journal}: {len(rep.undone)} change(s) undone, "
                 f"{len(rep.failed)} failed"] + [f"  FAILED {f}" for f in rep.failed]
        for line in lines:
            tr.write_line(line) if tr else print(line, file=sys.stderr)


@pytest.fixture
def kvds_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment for kvds subprocesses (and this process): results and scratch files under tmp_path, journals in
    the state directory `kvds restore` reads (STATE_DIR)."""
    env = dict(os.environ)
    env.update(
        KVDS_STATE_DIR=str(STATE_DIR),
        KVDS_RESULTS_DIR=str(tmp_path / "results"),
        KVDS_WORK_DIR=str(tmp_path / "work"),
        KVDS_NO_PROGRESS="1",
        PYTHONPATH=str(REPO),
    )
    for k in ("KVDS_STATE_DIR", "KVDS_RESULTS_DIR", "KVDS_WORK_DIR"):
        monkeypatch.setenv(k, env[k])
    return env


def run_kvds(args: list[str], env: dict[str, str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(KVDS + args, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


needs_root = doctor.skip_unless("root")  # the test changes kernel state


def needs_tool(path_or_name: str, why: str) -> pytest.MarkDecorator:
    """Skip when a program set-up installs (harness/setup/debian-packages.txt) is absent, except under CI=true:
    there set-up ran, so an absent tool is a broken set-up and the test must run (and fail), not skip."""
    present = Path(path_or_name).exists() if "/" in path_or_name else shutil.which(path_or_name) is not None
    return pytest.mark.skipif(not present and not doctor.in_ci(), reason=f"{path_or_name} is not installed: {why}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{doctor.MARK}(*names): capabilities the test needs (doctor.skip_unless)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip with the doctor's reason, or fail: a kvds error, or CI=true and the host kind must have it."""
    doctor.apply_gate(item)


def foreground_signals() -> None:
    """preexec_fn for a child a test interrupts the way a terminal's Ctrl-C would: a foreground process starts with
    SIGINT at its default. A test run started in the background (nohup, `&` without job control) inherits SIGINT
    ignored, and Python then leaves it ignored, so the child would never see the interrupt the test is about."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
