"""Stalls named on a real lab: a fetcher held off its CPU by a SCHED_FIFO spinner on the same CPU (a real run-queue
wait, counted by the kernel's schedstat) is flagged with that evidence; the same fetcher left alone with a
threshold it cannot reach is not. Per-fetch clocks from a real veth feed the split of e2e into wake-up lateness,
the wait behind a predecessor and network time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from harness import doctor, journal
from harness.knobs import create_netns, create_veth
from harness.paths import repo_root
from net_priority.fetch_clocks import rep_samples, wake_lateness

ROOT = repo_root()
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENDPOINT = [sys.executable, "-m", "net_priority.endpoint"]
HOG_S = 0.4  # how long the spinner holds the fetcher's CPU

pytestmark = doctor.skip_unless("root")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A fetch-server in its own namespace across a veth; yields its ADDR:PORT."""
    pid = os.getpid()
    ns, hif, net = f"kvds-st{pid}", f"kvst{pid % 100000}", f"10.247.{pid % 250}"
    with journal.scoped():
        create_netns(ns)
        create_veth(hif, ns, "st0", f"{net}.1/30", f"{net}.2/30")
        p = subprocess.Popen(["ip", "netns", "exec", ns, *ENDPOINT, "fetch-server", "--bind", f"{net}.2:0"], cwd=ROOT,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        assert line.startswith("ready "), p.stderr.read()
        try:
            yield line.split()[1]
        finally:
            p.terminate()
            p.communicate(timeout=30)


def _wait_connected(pid: int, timeout_s: float = 60.0) -> None:
    """Until the process holds a socket (the fetcher connects just before its schedule starts)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd")):
                return
        except OSError:
            pass
        time.sleep(0.005)
    pytest.fail("the fetcher did not connect")


def _fetch(addr: str, out: Path, cpu: int, hog: bool) -> dict[str, np.ndarray]:
    """200 fetches 5 ms apart, the fetcher pinned to `cpu`; with hog, a SCHED_FIFO spinner takes that CPU for HOG_S
    a third of the way in."""
    f = subprocess.Popen(["taskset", "-c", str(cpu), *ENDPOINT, "fetcher", "--connect", addr, "--sizes", "16K",
                          "--step-ms", "5", "--count", "200", "--out", str(out)], cwd=ROOT, env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if hog:
        _wait_connected(f.pid)
        time.sleep(0.2)  # a fifth of the way into the 1 s schedule (it starts 1 ms after connecting)
        spin = f"import time\nt = time.monotonic() + {HOG_S}\nwhile time.monotonic() < t: pass"
        subprocess.run(["taskset", "-c", str(cpu), "chrt", "-f", "50", sys.executable, "-c", spin], check=True,
                       timeout=60)
    _, err = f.communicate(timeout=120)
    assert f.returncode == 0, err
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def test_a_fetcher_held_off_its_cpu_is_flagged_with_its_run_queue_wait(server: str, tmp_path: Path) -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    z = _fetch(server, tmp_path / "hog.npz", cpu, hog=True)
    rep = rep_samples(z, int(z["warmup"]), 5.0, 20.0, {"fetcher": int(z["runq_wait_ns"])}, bulk_mbit=None)
    assert rep.stall is not None and rep.stall["stalled"], rep.stall
    assert "fetcher waited" in rep.stall["why"] and rep.stall["runq_ms"]["fetcher"] > 20, rep.stall
    # the held-off time is in the fetcher's clocks too: as wake-up lateness when the spinner caught it asleep
    # (about 92 % of each step), as a late last byte when it caught it waiting in recv for an answer
    assert rep.wake_late_ns.max() > 20e6 or rep.network_ns.max() > 20e6, rep.stall
    if rep.wake_late_ns.max() > 20e6:
        assert rep.stall["late_wakeups"] >= 1 and rep.stall["max_wake_late_ms"] > 20, rep.stall


def test_the_clocks_split_e2e_and_an_unreached_threshold_flags_nothing(server: str, tmp_path: Path) -> None:
    z = _fetch(server, tmp_path / "calm.npz", sorted(os.sched_getaffinity(0))[0], hog=False)
    w = int(z["warmup"])
    rep = rep_samples(z, w, 5.0, 60_000.0, {"fetcher": int(z["runq_wait_ns"]), "fetch-server": None}, bulk_mbit=None)
    assert rep.stall is not None and not rep.stall["stalled"] and rep.stall["why"] == ""
    assert rep.stall["runq_ms"]["fetch-server"] is None  # unknown evidence is kept as unknown, not as zero
    due, issued, sent, done = (z[k][w:] for k in ("intended_ns", "issue_ns", "sent_ns", "done_ns"))
    behind = np.maximum(0, np.concatenate([z["done_ns"][w - 1:w], done[:-1]]) - due)
    # e2e = behind + wake-up lateness + the send call + network time, fetch by fetch
    assert np.array_equal(rep.latency_ns, behind + rep.wake_late_ns + (sent - issued) + rep.network_ns)
    assert np.all(rep.network_ns > 0) and np.all(rep.wake_late_ns >= 0)


def test_wake_lateness_is_measured_from_when_the_fetcher_could_run() -> None:
    due = np.array([0, 10, 20, 30])
    done = np.array([5, 25, 27, 33])        # fetch 1 ends after fetch 2's due time: fetch 2 waits behind it
    issued = np.array([1, 12, 26, 30])
    assert wake_lateness(due, issued, done).tolist() == [1, 2, 1, 0]
