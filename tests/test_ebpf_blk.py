"""Block I/O histograms on a real kvds loop device: per-class counts equal the issued counts (within 1%)."""

from __future__ import annotations

import os
import threading

import pytest

from harness import doctor, journal
from harness.knobs import create_file, loop_attach
from harness.paths import work_dir
from tests.blk_workload import DEVICE_BYTES, direct_io

pytestmark = [doctor.skip_unless("ebpf.probe.blk"), pytest.mark.timeout(120)]

N_READS, N_WRITES = 1500, 1000


@pytest.mark.parametrize("filtering", ["device", "pid"])
def test_class_counts_match_issued(filtering: str) -> None:
    from ebpf.recorder import session

    with journal.session():
        backing = create_file(work_dir() / f"ebpf-blk-{os.getpid()}-{filtering}", DEVICE_BYTES, fill=b"b")
        dev = loop_attach(backing)
        pids = [os.getpid()] if filtering == "pid" else None
        errors: list[BaseException] = []
        with session(probes=("blk",), devices=[dev], pids=pids) as rec:
            readers = threading.Thread(target=direct_io, args=(dev, "rt/0", False, N_READS, 1, errors))
            writers = threading.Thread(target=direct_io, args=(dev, "idle", True, N_WRITES, 2, errors))
            readers.start(), writers.start()
            readers.join(), writers.join()
        assert not errors, errors
        res = rec.results()["blk"]
    name = os.path.basename(dev)
    done = res["issue_to_complete"][name]
    rt_reads = done.get("rt", {}).get("read", {"count": 0})["count"]
    idle_writes = done.get("idle", {}).get("write", {"count": 0})["count"]
    assert abs(rt_reads - N_READS) <= 0.01 * N_READS, (rt_reads, done.keys())
    assert abs(idle_writes - N_WRITES) <= 0.01 * N_WRITES, (idle_writes, done.keys())
    # The reader's requests never show up under another class, nor the writer's.
    assert "read" not in done.get("idle", {}) and "write" not in done.get("rt", {})
    # Only the chosen device was kept.
    assert set(res["issue_to_complete"]) == {name}
