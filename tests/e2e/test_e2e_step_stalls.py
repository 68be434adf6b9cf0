"""Where a decode step's time went (e2e/step_stalls.py): the replay thread's own taskstats delays around each decode
step, read through a raw genetlink query (ebpf.taskstats.DelayQuery). Real kernel: delay accounting switched on
through the journal, zram swap, pages really paged out and read back in a thread created after the switch (the
kernel gives a task a delay record only then, which is why e2e replays in a fresh thread: session.ReplayThread).
The swap-in test runs in a subprocess with its own journal; run under /tmp/kvds-kernel.lock."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from harness import doctor
from e2e.session import ReplayThread, Stopped
from e2e.step_stalls import KINDS, StepStalls, drop_glitches, memory_us, waits_per_step
from tests.conftest import REPO

# In a subprocess (its own journal): delay accounting on, zram swap, then a thread created after the switch pages a
# scratch mapping out and reads it back inside "step 1" of a StepStalls, and only reads resident memory in step 2;
# step 3 is not a decode step. Prints the per-step arrays and what the same thread's record said of itself.
SWAPIN = """
import json, mmap, os, threading
import numpy as np
from harness import journal, knobs
from kernel_vm import swap_backend
from ebpf.taskstats import DelayQuery, TaskstatsClient
from e2e.step_stalls import StepStalls
out = {}
with journal.session():
    knobs.sysctl("kernel.task_delayacct", 1)
    swap_backend.set_up("zram", 64 << 20)
    with TaskstatsClient() as c:
        q = DelayQuery(c)
    def work():
        page, n = mmap.PAGESIZE, 2048
        m = mmap.mmap(-1, n * page)
        for i in range(n):
            m[i * page:i * page + 8] = (i + 1).to_bytes(8, "little")
        st = StepStalls(q.task, frozenset({1, 2}))
        m.madvise(21)  # MADV_PAGEOUT
        st.begin(1)
        sum(m[i * page] for i in range(n))
        st.end(1)
        st.begin(2)
        sum(m[i * page] for i in range(n))
        st.end(2)
        st.begin(3)
        st.end(3)
        a = st.arrays([])
        out.update({k: a[k].tolist() for k in ("reclaim", "swapin", "blkio", "cpu", "guard_waits")})
        out["whole_task"] = q.task(threading.get_native_id())
        out["group"] = q.group(os.getpid())
        m.close()
    t = threading.Thread(target=work)
    t.start()
    t.join()
    q.close()
print(json.dumps(out))
"""


@doctor.skip_unless("root", "swap.zram", "ebpf.taskstats")
def test_a_steps_swap_ins_show_as_its_swap_in_delay(kvds_env: dict[str, str]) -> None:
    res = subprocess.run([sys.executable, "-c", SWAPIN], cwd=REPO, env=kvds_env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # one row per decode step (1 and 2; step 3 is not one); step 1 read 2,048 paged-out pages back, step 2 none
    assert len(got["swapin"]) == 2, got
    assert got["swapin"][0] > 0 and got["swapin"][1] == 0, got
    assert got["guard_waits"] == [0, 0]
    # the thread's own record holds at least what its steps saw; the group query answers for the process too
    assert got["whole_task"]["swapin"] / 1e3 >= got["swapin"][0]
    assert got["group"] is not None and set(got["group"]) >= set(KINDS)


@doctor.skip_unless("ebpf.taskstats")
def test_the_raw_query_agrees_with_pyroute2s() -> None:
    """The same process's record through DelayQuery and through TaskstatsClient (pyroute2): the same fields, and
    the run-queue delay never goes backwards between the two."""
    from ebpf.taskstats import DelayQuery, TaskstatsClient

    with TaskstatsClient() as c:
        q = DelayQuery(c)
        try:
            a = c.query(os.getpid())
            b = q.group(os.getpid())
            gone = q.task(2 ** 22 + 12345)
        finally:
            q.close()
    assert a is not None and b is not None and set(b) == set(a.delay_ns)
    assert b["cpu"] >= a.delay_ns["cpu"]
    assert gone is None  # no such task: ESRCH is "gone", not an error


def test_waits_are_placed_in_the_steps_they_fell_in() -> None:
    t0 = np.array([0, 100, 200])
    t1 = np.array([90, 190, 290])
    assert waits_per_step(t0, t1, [5, 50, 95, 150, 290, 300]).tolist() == [2, 1, 1]
    assert waits_per_step(t0, t1, []).tolist() == [0, 0, 0]


def test_a_delay_longer_than_its_step_is_dropped_and_counted() -> None:
    stalls = {k: np.array([10.0, 5e10, 3.0]) if k == "blkio" else np.array([1.0, 2.0, -1.0]) for k in KINDS}
    counts = drop_glitches(stalls, np.array([20.0, 20.0, 20.0]))
    assert dict(zip(KINDS, counts.tolist())) == {"reclaim": 1, "swapin": 1, "blkio": 1, "cpu": 1}
    assert np.isnan(stalls["blkio"][1]) and stalls["blkio"][0] == 10.0
    # a dropped value counts 0 in the memory stall the prediction adds
    assert memory_us(stalls).tolist() == [2.0, 4.0, 0.0]


class _Hooks:
    stop: threading.Event | None = None

    def step_begin(self, step: int) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped(f"stopped before step {step}")


def test_a_replay_thread_stops_at_its_next_step_when_kvds_unwinds() -> None:
    """SIGINT reaches the main thread while it waits for the replay: the replay stops at its next step, and the
    main thread waits for that before it goes on (the arena is unmapped after)."""
    hooks = _Hooks()
    steps = []

    def replay() -> None:
        for i in range(10_000):
            hooks.step_begin(i)
            steps.append(i)
            time.sleep(0.01)

    rt = ReplayThread(replay, hooks)  # type: ignore[arg-type]
    rt.go()
    # Python's own SIGINT handler, even where the suite was started with SIGINT ignored (a background job)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            rt.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert rt.done.is_set() and isinstance(rt.error, Stopped)
    rt.thread.join(5)
    assert not rt.thread.is_alive()
    assert 0 < len(steps) < 10_000


def test_a_replay_error_reaches_the_main_thread() -> None:
    hooks = _Hooks()

    def replay() -> None:
        raise OSError(5, "the slow tier failed")

    rt = ReplayThread(replay, hooks)  # type: ignore[arg-type]
    rt.go()
    with pytest.raises(OSError, match="slow tier failed"):
        rt.join()
