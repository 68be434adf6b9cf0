"""Before a guest boots, the host fills the guest's numba cache when the sources changed: the command declares the
host command that compiles what its guest run needs (e2e: its own dry run), the core runs it with the guest's numba
settings once per state of the sources, and says what happened (a failed fill too: the guest then compiles under
TCG, and that is said, not silent)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.remote import guest_numba
from harness.remote.dispatch import prepare_guest
from harness.remote.guest import GUEST_NUMBA
from harness.remote.targets import GuestTarget, LocalTarget


def test_the_fingerprint_follows_the_python_sources_only(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    src = tmp_path / "pkg" / "a.py"
    src.write_text("x = 1\n")
    first = guest_numba.sources_fingerprint(tmp_path)
    assert guest_numba.sources_fingerprint(tmp_path) == first
    (tmp_path / "notes.md").write_text("not a source\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "b.py").write_text("hidden\n")
    assert guest_numba.sources_fingerprint(tmp_path) == first
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a fresh clone: new times, same content
    assert guest_numba.sources_fingerprint(tmp_path) == first
    clone = tmp_path / "elsewhere"
    (clone / "pkg").mkdir(parents=True)
    (clone / "pkg" / "a.py").write_text("x = 1\n")
    assert guest_numba.sources_fingerprint(clone) == first
    src.write_text("x = 2\n")
    second = guest_numba.sources_fingerprint(tmp_path)
    assert second != first
    (tmp_path / "pkg" / "c.py").write_text("y = 2\n")
    assert guest_numba.sources_fingerprint(tmp_path) not in (first, second)


def test_a_fill_runs_once_per_state_of_the_sources_and_a_failure_is_said(
        kvds_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    env = guest_numba.guest_numba_env()
    assert env["NUMBA_CPU_NAME"] == "generic" and env["NUMBA_CACHE_DIR"] == str(tmp_path / "cache" / GUEST_NUMBA)
    failing = ["e2e", "--steps", "0", "--dry-run"]  # refused by e2e's parser: exit 2, nothing compiled
    got = guest_numba.fill(failing, fingerprint=lambda: "state-1")
    assert "not filled (kvds exited 2" in got and "the guest compiles" in got
    assert not (tmp_path / "cache" / GUEST_NUMBA / guest_numba.STAMPS / "state-1").exists()
    got = guest_numba.fill(["e2e", "--help"], fingerprint=lambda: "state-1")
    assert got.startswith("guest numba cache: filled on this host")
    stamp = tmp_path / "cache" / GUEST_NUMBA / guest_numba.STAMPS / "state-1"
    assert stamp.read_text() == "e2e --help\n"
    # the same sources: nothing runs (the failing command would say so)
    assert "up to date" in guest_numba.fill(failing, fingerprint=lambda: "state-1")
    # changed sources: it runs again
    assert "not filled" in guest_numba.fill(failing, fingerprint=lambda: "state-2")


def test_e2e_declares_its_dry_run_and_only_a_guest_target_fills(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    args = build_parser().parse_args(["e2e", "--steps", "20", "--target", "guest"])
    assert args.guest_warm(["e2e", "--steps", "20"]) == ["e2e", "--steps", "20", "--dry-run"]
    assert args.guest_warm(["e2e", "--dry-run"]) == ["e2e", "--dry-run"]
    assert not hasattr(build_parser().parse_args(["remote", "baseline", "--target", "guest"]), "guest_warm")
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    assert prepare_guest(["e2e"], [LocalTarget()], args.guest_warm) is None
    assert prepare_guest(["e2e"], [GuestTarget()], None) is None


@pytest.mark.slow  # compiles the simulator from nothing: about a minute on a loaded 2-CPU host
@pytest.mark.timeout(900)
def test_the_fill_leaves_the_simulator_compiled_for_this_checkout(kvds_env: dict[str, str], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    args = build_parser().parse_args(["e2e", "--steps", "20", "--reps", "1", "--target", "guest"])
    got = guest_numba.fill(args.guest_warm(["e2e", "--steps", "20", "--reps", "1"]))
    assert got.startswith("guest numba cache: filled on this host"), got
    # numba files a source directory's cache under <name>_<sha1 of its path>: this checkout's, the guest's too
    here = str(Path(guest_numba.__file__).resolve().parents[2] / "kv_policy")
    ours = tmp_path / "cache" / GUEST_NUMBA / f"kv_policy_{hashlib.sha1(here.encode()).hexdigest()}"
    assert list(ours.glob("*.nbi")), sorted(p.name for p in (tmp_path / "cache" / GUEST_NUMBA).iterdir())
    assert "up to date" in guest_numba.fill(args.guest_warm(["e2e", "--steps", "20", "--reps", "1"]))
