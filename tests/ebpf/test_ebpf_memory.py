"""Reclaim histograms under a v1 memcg limit with zram swap, and swap-in delay through taskstats."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness import doctor, journal
from harness.knobs import create_cgroup, zram_swap

MiB = 1 << 20

# A child that waits for a go line on stdin, allocates private anonymous memory page by page, optionally
# pushes it to swap with MADV_PAGEOUT (21) and touches it again, then waits for a final line before exiting.
CHILD = r"""
import mmap, sys
size, pageout = int(sys.argv[1]), sys.argv[2] == "1"
sys.stdin.readline()
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(15)  # MADV_NOHUGEPAGE: one fault per 4 KiB page, and pages reclaimable one by one
for off in range(0, size, 4096):
    m[off] = 1
if pageout:
    m.madvise(21)  # MADV_PAGEOUT: out to zram at once
    total = 0
    for off in range(0, size, 4096):
        total += m[off]
    assert total == size // 4096
print("done", flush=True)
sys.stdin.readline()
"""


def _child(size: int, pageout: bool) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(size), "1" if pageout else "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _go_and_wait(p: subprocess.Popen) -> None:
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "done"


@doctor.skip_unless("ebpf.probe.reclaim", "swap.zram", "memcg")
@pytest.mark.timeout(120)
def test_memcg_limit_fills_reclaim_histogram() -> None:
    from ebpf.recorder import session

    with journal.session():
        zram_swap(512 * MiB)
        cg = create_cgroup("ebpf-reclaim", ("memory",))
        cg.set("memory", "memory.limit_in_bytes", 48 * MiB)
        child = _child(160 * MiB, pageout=False)
        try:
            cg.add_pid(child.pid)
            with session(probes=("reclaim",), cgroups=[str(cg.path("memory"))]) as rec:
                _go_and_wait(child)
            res = rec.results()["reclaim"]
        finally:
            child.kill()
            child.wait()
    assert res["latency"]["memcg"]["count"] > 0
    mine = {path: kinds for path, kinds in res["by_cgroup"].items() if path.endswith(cg.name)}
    assert mine, res["by_cgroup"].keys()
    memcg = next(iter(mine.values()))["memcg"]
    assert memcg["pages_reclaimed"] > 0 and memcg["count"] == memcg["hist"]["count"]
    assert str(child.pid) in res["by_pid"]


@doctor.skip_unless("ebpf.probe.delays", "ebpf.probe.faults", "swap.zram")
@pytest.mark.timeout(120)
def test_zram_swapin_shows_in_taskstats_and_faults_are_counted() -> None:
    from ebpf.recorder import Recorder

    size = 32 * MiB
    with journal.session():
        zram_swap(256 * MiB)
        rec = Recorder(probes=("faults", "delays"), pids=[])
        rec.start()
        child = _child(size, pageout=True)
        try:
            rec.add_pid(child.pid)
            _go_and_wait(child)
            child.stdin.write("bye\n")
            child.stdin.flush()
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, still answering taskstats
            rec.stop()
        finally:
            child.kill()
            child.wait()
        res = rec.results()
    delays = res["delays"]["by_pid"][str(child.pid)]
    assert delays["swapin"]["count"] > 0 and delays["swapin"]["delay_ns"] > 0, delays
    faults = res["faults"]["by_pid"][str(child.pid)]
    assert faults["user"].get("write-not-present", 0) >= size // 4096  # the first touch of every page
    assert "no latency" in res["faults"]["note"]
