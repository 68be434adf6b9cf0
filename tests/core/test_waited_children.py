"""A long child another thread waits on (QEMU behind `--target guest`): end_waited kills it so that thread returns
and the main thread's way out does not wait for it, release says it was ended, and none starts until reopened."""

from __future__ import annotations

import subprocess
import threading

import pytest

from harness.knobs import workers


def test_end_waited_kills_the_child_a_thread_waits_on_and_refuses_new_ones() -> None:
    proc = workers.popen_waited(["sleep", "600"], "sleep", stdout=subprocess.DEVNULL)
    outcome: list[tuple[int, bool]] = []

    def wait() -> None:
        code = proc.wait()
        outcome.append((code, workers.release(proc)))

    t = threading.Thread(target=wait)
    t.start()
    try:
        assert workers.end_waited() == 1
        t.join(timeout=120)  # generous: a child left running would hold the thread for 600 s
        assert not t.is_alive()
        assert outcome == [(-9, True)]  # SIGKILL, and release knows end_waited did it
        with pytest.raises(workers.Ended):
            workers.popen_waited(["true"], "true")
    finally:
        workers.reopen_waited()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    again = workers.popen_waited(["true"], "true")
    assert again.wait() == 0 and workers.release(again) is False  # exited by itself, not ended
