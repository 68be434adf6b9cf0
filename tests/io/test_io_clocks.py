"""Three clocks per critical read and stalls found, not averaged in.

Pure parts on constructed repetitions (the arithmetic the summaries rest on: wake-up + backlog + service =
end-to-end; a slow read during which the spill moved on is interference, one during which nothing moved is a
stall), then on the real kernel: ioload's CLOCK_MONOTONIC stamps and the block layer's (tracefs, trace_clock mono)
come from one clock, so every read request the block layer issued lies inside one read's submit -> complete.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness import doctor, journal
from io_priority import clocks, device, stalls, variant_figures, variant_runs
from io_priority.workload import RepResult, Workload
from tests.io.conftest import SMALL

MS = 1_000_000


def _rep(due: list[int], sub: list[int], done: list[int], wlog: list[tuple[int, int, int]] | None = None,
         blk: list[tuple[int, int, int, int, int]] | None = None) -> RepResult:
    c = np.array([due, sub, done], dtype=np.int64).T
    return RepResult(c[:, 2] - c[:, 0], {"reads": len(due), "errors": 0, "late": 0}, None, None, clocks=c,
                     wlog=np.array(wlog, dtype=np.int64).reshape(-1, 3) if wlog is not None else None,
                     blk_pairs=np.array(blk, dtype=np.int64).reshape(-1, 5) if blk is not None else None)


def test_three_clocks_add_up_and_separate_backlog_from_wakeup() -> None:
    # read 0 on time, slow on the device (4 ms); read 1 due at 5 ms but its predecessor ends at 9 ms (backlog 4 ms),
    # then the reader wakes 0.5 ms late; read 2 due at 10 ms, submitted 2 ms late with nothing before it (host)
    r = _rep([0, 5 * MS, 10 * MS], [0, 9 * MS + MS // 2, 12 * MS], [9 * MS, 10 * MS, 12 * MS + MS // 5])
    assert list(r.backlog_ns) == [0, 4 * MS, 0]
    assert list(r.wakeup_ns) == [0, MS // 2, 2 * MS]
    assert list(r.service_clock_ns) == [9 * MS, MS // 2, MS // 5]
    assert (r.wakeup_ns + r.backlog_ns + r.service_clock_ns == r.latencies_ns).all()
    # the reader wakes 10 ms late for read 0; read 1 (due at 5 ms) then queues behind it: its 5.2 ms of lateness
    # is carried host delay, not device backlog (both reads take 0.2 ms on the device)
    c = _rep([0, 5 * MS], [10 * MS, 10 * MS + MS // 5], [10 * MS + MS // 5, 10 * MS + 2 * (MS // 5)])
    assert list(c.wakeup_ns) == [10 * MS, 5 * MS + MS // 5] and list(c.backlog_ns) == [0, 0]


def test_excess_host_share_from_the_slowest_reads() -> None:
    n = 2000
    due = np.arange(n, dtype=np.int64) * 5 * MS
    ref = _rep(list(due), list(due), list(due + MS))
    # the same device time, but every 50th read wakes 3 ms late: the whole excess is the host's
    late = np.where(np.arange(n) % 50 == 0, 3 * MS, 0)
    host = _rep(list(due), list(due + late), list(due + late + MS))
    ex = clocks.excess(clocks.tail_composition([host], None), clocks.tail_composition([ref], None))
    assert ex["host_share"] == pytest.approx(1.0) and ex["device_us"] == pytest.approx(0.0)
    dev = _rep(list(due), list(due), list(due + MS + late))  # the same excess on the device
    ex = clocks.excess(clocks.tail_composition([dev], None), clocks.tail_composition([ref], None))
    assert ex["host_share"] == pytest.approx(0.0) and ex["device_us"] == pytest.approx(3000.0)
    assert "host 0% / device 100%" in clocks.host_share_text(ex)
    short = clocks.tail_composition([_rep([0], [0], [MS])], None)
    assert short is None  # one read: no p99 tail to decompose


def test_stall_needs_every_stream_stopped() -> None:
    due = [0, 5 * MS, 10 * MS, 200 * MS]
    sub = [0, 100 * MS, 101 * MS, 200 * MS]
    done = [100 * MS, 101 * MS, 102 * MS, 201 * MS]  # read 0 took 100 ms; reads 1, 2 were due inside it
    # the writer had a write in flight the whole time and completed nothing: a stall, placed by the block layer
    blk = [(MS, 99 * MS, 0, 2, 4)]
    found = stalls.find(_rep(due, sub, done, wlog=[(0, 150 * MS, 1 << 20)], blk=blk), threshold_ms=50)
    assert found.count == 1 and found.spans[0][2] == "device"
    assert list(found.affected) == [True, True, True, False]
    # the same slow read while the spill completed a write inside it: interference, not a stall
    moved = stalls.find(_rep(due, sub, done, wlog=[(0, 50 * MS, 1 << 20)]), threshold_ms=50)
    assert moved.count == 0 and not moved.affected.any()
    # a paced writer with nothing in flight during the slow read (its last write ended before): not set aside
    held = stalls.find(_rep(due, sub, done, wlog=[(0, MS // 2, 1 << 20), (150 * MS, 151 * MS, 1 << 20)]),
                       threshold_ms=50)
    assert held.count == 0
    # block layer served it in 1 ms: the time went before the device (host)
    host = stalls.find(_rep(due, sub, done, blk=[(98 * MS, 99 * MS, 0, 2, 4)]), threshold_ms=50)
    assert host.spans[0][2] == "host"
    # a frozen reader: due at 0, submitted only at 100 ms, served in 0.1 ms; nothing else moved: a host stall
    frozen = stalls.find(_rep([0, 5 * MS], [100 * MS, 100 * MS + MS // 5], [100 * MS + MS // 10, 100 * MS + MS // 2],
                              blk=[(100 * MS + 10_000, 100 * MS + 90_000, 0, 2, 4)]), threshold_ms=50)
    assert frozen.count == 1 and frozen.spans[0][2] == "host" and list(frozen.affected) == [True, True]
    s = stalls.summary([found, moved], 50)
    assert s["stalls"] == 1 and s["stalled_reps"] == [0] and s["reads_affected"] == 3 and s["where"] == {"device": 1}


def test_summary_reports_stall_free_apart_and_keeps_every_read() -> None:
    n = 1500
    due = np.arange(n, dtype=np.int64) * 5 * MS
    svc = np.full(n, MS)
    svc[700] = 400 * MS  # one stall in the middle of repetition 0
    sub = due.copy()
    done = np.empty(n, dtype=np.int64)
    t = 0
    for i in range(n):  # serial reader: a read starts when it is due and its predecessor is done
        sub[i] = max(due[i], t)
        done[i] = t = sub[i] + svc[i]
    stalled = _rep(list(due), list(sub), list(done))
    clean = [_rep(list(due), list(due), list(due + MS)) for _ in range(2)]
    v = variant_runs.Variant("unloaded", None)
    m = variant_figures.summarize([v], {"unloaded": [stalled, *clean]}, "psync", n_boot=50)["unloaded"]
    assert m["stalls"]["stalls"] == 1 and m["stalls"]["reads_affected"] > 70  # the backlog behind 400 ms
    assert m["reads"] == 3 * n  # nothing dropped from the counts or the all-reads figures
    assert m["latency_us"]["p99"]["value"] > 1000  # all reads: the stall shows
    assert m["stall_free"]["end_to_end_us"]["p99"]["value"] == pytest.approx(1000)


@pytest.mark.parametrize("wait", ["sleep", "spin"])
@doctor.skip_unless("loop", "io_uring")
@doctor.skip_unless("root")
def test_block_layer_issue_lies_inside_each_read(wait: str) -> None:
    work = Workload(engine="io_uring", duration_s=0.6, rate=300.0, wait=wait)
    with journal.session():
        dev = device.prepare("loop", SMALL)
        variant_runs.with_scheduler(dev, "mq-deadline")
        results, _ = variant_runs.run_variants(dev, work, [variant_runs.Variant("unloaded", None)], reps=1)
    r = results["unloaded"][0]
    assert r.has_clocks and r.reader["reads"] > 100
    due, sub, done = r.clocks.T
    assert (due <= sub).all() and (sub < done).all() and (np.diff(due) > 0).all()
    reads = r.blk_pairs[r.blk_pairs[:, 2] == 0]
    assert reads.shape[0] == r.reader["reads"]  # every read request paired issue -> complete
    # one clock: each request's block-layer issue and completion lie inside one read's submit -> complete
    k = np.searchsorted(sub, reads[:, 0], side="right") - 1
    assert (k >= 0).all()
    assert (reads[:, 0] >= sub[k]).all() and (reads[:, 1] <= done[k]).all()
    assert ((reads[:, 1] - reads[:, 0]) <= (done[k] - sub[k])).all()  # the fourth clock within the third
