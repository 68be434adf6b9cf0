"""Block I/O histograms on a real kvds loop device: every issued request is accounted for, per class (timed in
its class's histogram, or counted as unfinished/untimed), and none shows up under another class."""

from __future__ import annotations

import os
import threading

import pytest

from harness import doctor, journal
from harness.knobs import create_file, loop_attach
from harness.paths import work_dir
from tests.ebpf.blk_workload import DEVICE_BYTES, assert_accounted, direct_io

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
        full = rec.results()
    res = full["blk"]
    name = os.path.basename(dev)
    done = res["issue_to_complete"][name]
    assert_accounted(full, dev, "rt", "read", N_READS)
    assert_accounted(full, dev, "idle", "write", N_WRITES)
    # The reader's requests never show up under another class, nor the writer's.
    assert "read" not in done.get("idle", {}) and "write" not in done.get("rt", {})
    # Only the chosen device was kept.
    assert set(res["issue_to_complete"]) == {name}
