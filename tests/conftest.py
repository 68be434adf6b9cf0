"""Shared fixtures: isolated results/scratch directories per test, journals where `kvds restore` finds them, a
way to run the real `kvds` CLI, and the debug guest kernel, built once per session before the first test that
needs it. Each tests/<track>/conftest.py holds the fixtures its own files share.

Markers: `slow` (hand-set: outside `make test`), `guest` (set here, never by hand: the test boots a QEMU guest or
needs its kernel, known by the fixtures it uses or the `qemu.guest` capability it names; `make test-fast` leaves
these out).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import doctor
from harness.paths import state_dir
from tests import background_build
from tests.background_build import BackgroundBuild, guests_last

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


# A test that takes one of these fixtures, or names this capability, boots a guest (or needs the guest kernel).
GUEST_FIXTURES = frozenset({"debug_kernel", "kernel", "guest_lab"})
GUEST_CAPABILITY = "qemu.guest"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{doctor.MARK}(*names): capabilities the test needs (doctor.skip_unless)")
    config.addinivalue_line("markers", "guest: boots a QEMU guest or needs its kernel (set by tests/conftest.py)")


def boots_guest(item: pytest.Item) -> bool:
    """Whether a test needs the guest: by the fixtures it takes and the capabilities it names, never a list."""
    if GUEST_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return any(GUEST_CAPABILITY in mark.args for mark in item.iter_markers(doctor.MARK))


_BACKGROUND: BackgroundBuild | None = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark guest tests (before `-m` selects on the mark) and run them after the host tests."""
    for item in items:
        if boots_guest(item):
            item.add_marker(pytest.mark.guest)
    guests_last(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """With the selection final: start the debug kernel's build in the background when the selected guest tests
    will need it and it is not cached (tests/background_build.py says why)."""
    global _BACKGROUND
    if _BACKGROUND is None and background_build.needed(session.items, session.config):
        _BACKGROUND = BackgroundBuild.start(KVDS)
        _say(session.config, f"kvds: building the debug guest kernel in the background while the host tests run "
                             f"(log: {_BACKGROUND.log})")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _BACKGROUND is not None:
        _BACKGROUND.stop()


def _say(config: pytest.Config, line: str) -> None:
    """A line on the terminal, also from inside a test's set-up (where output capture would otherwise keep it)."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        tr.write_line(line) if tr else print(line, file=sys.stderr)


def _debug_build(config: pytest.Config):
    """The default debug kernel: after the background build (if one runs), from the cache or built here."""
    from qemu_validation.boot import guest_command
    from qemu_validation.kernel import build

    if _BACKGROUND is not None:
        _BACKGROUND.wait(lambda line: _say(config, line))
    return build.ensure_built(guest_command.DEFAULT_SPEC)


@pytest.fixture(scope="session")
def debug_kernel(pytestconfig: pytest.Config):
    """The default debug guest kernel (`kvds qemu build --kasan`: 6.12 + mm_intent + KASAN): from the background
    build started at collection, from ~/.cache/kvds/qemu, or built here (about 11 minutes cold on 2 cores), so
    that no test finds it missing. Gated like a test that names `qemu.guest`."""
    from qemu_validation.boot import guest_command
    from qemu_validation.kernel import build

    action, why = doctor.gate(GUEST_CAPABILITY)
    if action == "fail":
        pytest.fail(why, pytrace=False)
    if action == "skip":
        pytest.skip(why)
    return _debug_build(pytestconfig)


@pytest.fixture(scope="session")
def guest_lab(pytestconfig: pytest.Config):
    """For a test of a command that boots the guest where the host can (the suite's qemu stage): the debug kernel
    built first where the doctor says a guest boots here, else None (the command then skips with that reason)."""
    if not doctor.capability(GUEST_CAPABILITY).ok:
        return None
    return _debug_build(pytestconfig)


@pytest.fixture(autouse=True)
def _guest_kernel_first(request: pytest.FixtureRequest) -> None:
    """Every `guest` test gets the debug kernel built before it runs (after the doctor's gate has let it run)."""
    if request.node.get_closest_marker("guest") is not None:
        request.getfixturevalue("debug_kernel")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip with the doctor's reason, or fail: a kvds error, or CI=true and the host kind must have it."""
    doctor.apply_gate(item)


def foreground_signals() -> None:
    """preexec_fn for a child a test interrupts the way a terminal's Ctrl-C would: a foreground process starts with
    SIGINT at its default. A test run started in the background (nohup, `&` without job control) inherits SIGINT
    ignored, and Python then leaves it ignored, so the child would never see the interrupt the test is about."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stall_qemu_when_told(log_dir: Path, share: Path, stall_s: float,
                         seen: list[str] | None = None) -> tuple[threading.Thread, list[int]]:
    """A host thread that, once the guest writes /share/go, stops this test's QEMU (found by its console log
    path) for stall_s seconds: a host stall of the vCPU, made on purpose. The list gets the stopped QEMU's pid;
    `seen`, when given, the names in the share at the moment QEMU stopped (a guest that writes a file when its
    measured phase ends can show that the stall fell inside the phase)."""
    import psutil

    stalled: list[int] = []

    def stall() -> None:
        deadline = time.monotonic() + 600
        while not (share / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        qemu = [p for p in psutil.process_iter(["cmdline"])
                if any(str(log_dir) in a for a in (p.info["cmdline"] or []))]
        if len(qemu) != 1:
            return  # the test fails on the empty list
        qemu[0].suspend()
        if seen is not None:
            seen.extend(sorted(p.name for p in share.iterdir()))
        time.sleep(stall_s)
        qemu[0].resume()
        stalled.append(qemu[0].pid)

    t = threading.Thread(target=stall, daemon=True)
    t.start()
    return t, stalled
