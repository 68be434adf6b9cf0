"""A guest command's status lines reach the host while the guest runs: the guest's kvds keeps `say` under --json
when told to (stdout stays the JSON), and the host hands on each whole line its stderr file gains."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from harness import progress
from harness.remote.guest import follow
from tests.remote.conftest import kvds


def test_follow_hands_on_whole_lines_as_they_are_appended(tmp_path: Path) -> None:
    path = tmp_path / "stderr"
    got: list[str] = []
    stop = threading.Event()
    t = threading.Thread(target=follow, args=(path, got.append, stop, 0.01))
    t.start()
    try:
        time.sleep(0.05)  # the file does not exist yet: nothing, no error
        path.write_text("e2e [1/4] LRU / no intents rep 1/1: 3.0 s\npartial")
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == ["e2e [1/4] LRU / no intents rep 1/1: 3.0 s"]  # the unfinished line waits for its newline
        with path.open("a") as f:
            f.write(" line\n\n[2/4] next\n")
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == ["e2e [1/4] LRU / no intents rep 1/1: 3.0 s", "partial line", "[2/4] next"]
    finally:
        stop.set()
        t.join(timeout=30)
    assert not t.is_alive()


def test_status_lines_under_json_only_when_asked(tmp_path: Path) -> None:
    """A run that files its results prints the JSON on stdout either way; its stderr carries the "results in"
    status line under --json only with the variable the guest target sets."""
    argv = ["remote", "baseline", "--duration", "0.3", "--file-mib", "4", "--json"]
    quiet = kvds(*argv, store=tmp_path / "a", env={"KVDS_WORK_DIR": str(tmp_path)})
    told = kvds(*argv, store=tmp_path / "b", env={"KVDS_WORK_DIR": str(tmp_path), progress.STATUS_LINES_ENV: "1"})
    assert quiet.returncode == told.returncode == 0, quiet.stderr + told.stderr
    assert json.loads(quiet.stdout)["run"] and json.loads(told.stdout)["run"]
    assert "results in" not in quiet.stderr
    assert f"results in {tmp_path / 'b'}" in told.stderr


def test_the_lines_written_just_before_the_end_are_relayed(tmp_path: Path) -> None:
    """The guest's last status lines land between the relay's last poll and the end of the run: the relay reads once
    more after it is stopped, and the runner joins it, so they reach the host too."""
    path = tmp_path / "stderr"
    got: list[str] = []
    stop = threading.Event()
    t = threading.Thread(target=follow, args=(path, got.append, stop, 3600.0))  # no poll would come in time
    t.start()
    path.write_text("e2e [4/4] ExpectedNextUse / intents rep 1/1: 9.0 s\n")
    stop.set()
    t.join(timeout=30)
    assert not t.is_alive()
    assert got == ["e2e [4/4] ExpectedNextUse / intents rep 1/1: 9.0 s"]
