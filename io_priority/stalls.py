"""Stalls found, not averaged in: a slow read during which nothing of ours made progress.

A read is *interfered with* when a spill write completed while it waited (the writer kept the device busy and
moved on). It is part of a *stall* when the time from when it could start (its due time, its predecessor done)
to its completion exceeds the stall threshold and every stream running in that window stopped together: the
reader alone (no writer in the variant), or the reader and a writer whose writes were in flight and none of
which completed. The cause then lies outside the mapping under test (the host's CPUs, the shared disk below the
loop device, another tenant). A slow read while a paced writer had nothing in flight is *not* set aside: whether
the writer's earlier writes slowed it cannot be told apart, and the rule must never flatter a mapping. The reads
a stall delays (due before it ended, completed after it started) are flagged with it. The block layer's own
issue -> complete time for the stalled read (tracefs pairs, CLOCK_MONOTONIC) says whether the time was spent
inside the device or outside it (a reader not woken or not scheduled, the submission path, the loop kworker).
Summaries report stall-free figures and the stall count side by side; the raw samples keep every read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from io_priority.workload import RepResult

DEFAULT_STALL_MS = 50.0  # ten 5 ms read intervals: far beyond a read queued behind a full spill queue here


@dataclass
class RepStalls:
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start_ns, end_ns, where)
    affected: np.ndarray | None = None  # bool per read: delayed by a stall

    @property
    def count(self) -> int:
        return len(self.spans)

    def as_dict(self) -> dict[str, Any]:
        return {"stalls": self.count, "reads_affected": int(self.affected.sum()) if self.affected is not None else 0,
                "stall_ms": [round((e - s) / 1e6, 3) for s, e, _ in self.spans],
                "where": [w for _, _, w in self.spans]}


def _where(blk: np.ndarray | None, sub: int, done: int) -> str:
    """"device" when the block layer held the stalled read for at least half its service time, "host" when it
    issued and completed it quickly (the time went before the device or after it), "unknown" without a pair."""
    if blk is None or not blk.size:
        return "unknown"
    reads = blk[(blk[:, 2] == 0) & (blk[:, 0] >= sub - 1_000_000) & (blk[:, 1] <= done + 1_000_000)]
    if not reads.size:
        return "unknown"
    inside = int((reads[:, 1] - reads[:, 0]).max())
    return "device" if inside >= 0.5 * (done - sub) else "host"


def find(rep: RepResult, threshold_ms: float = DEFAULT_STALL_MS) -> RepStalls:
    """Stalls of one repetition (needs ioload's clocks; without them, none can be found and none is claimed)."""
    if not rep.has_clocks:
        return RepStalls(affected=np.zeros(rep.latencies_ns.size, dtype=bool))
    due, done = rep.clocks[:, 0], rep.clocks[:, 2]
    # from when the read could start (due, and its predecessor done) to its completion: a frozen reader (not
    # woken, not scheduled) and a read stuck in the I/O path both show here
    start = np.maximum(due, np.concatenate([due[:1], done[:-1]]))
    slow = np.flatnonzero(done - start > threshold_ms * 1e6)
    writer = rep.wlog is not None
    wlog = rep.wlog if writer and rep.wlog.size else np.zeros((0, 3), dtype=np.int64)
    wdone = np.sort(wlog[:, 1])
    spans: list[tuple[int, int, str]] = []
    for i in slow:
        s, e = int(start[i]), int(done[i])
        lo, hi = np.searchsorted(wdone, [s, e], side="right")
        if hi > lo:  # the spill moved on while this read waited: interference, not a stall
            continue
        if writer and not ((wlog[:, 0] < e) & (wlog[:, 1] > s)).any():
            # the writer had nothing in flight (a paced writer holding back): whether its earlier writes slowed
            # the read cannot be told apart, so the read is not set aside (never flatters a mapping)
            continue
        where = _where(rep.blk_pairs, s, e)
        if spans and s <= spans[-1][1]:  # overlapping spans merge
            ps, pe, pw = spans[-1]
            spans[-1] = (ps, max(pe, e), pw if pw == where else "mixed")
        else:
            spans.append((s, e, where))
    affected = np.zeros(due.size, dtype=bool)
    for s, e, _ in spans:
        affected |= (due <= e) & (done >= s)
    return RepStalls(spans, affected)


def find_all(reps: list[RepResult], threshold_ms: float = DEFAULT_STALL_MS) -> list[RepStalls]:
    return [find(r, threshold_ms) for r in reps]


def summary(found: list[RepStalls], threshold_ms: float) -> dict[str, Any]:
    """Per variant: how many stalls, in which repetitions, how many reads they delayed, and where they were."""
    where: dict[str, int] = {}
    for f in found:
        for _, _, w in f.spans:
            where[w] = where.get(w, 0) + 1
    return {"threshold_ms": threshold_ms, "stalls": sum(f.count for f in found),
            "stalled_reps": [k for k, f in enumerate(found) if f.count],
            "reads_affected": sum(int(f.affected.sum()) for f in found if f.affected is not None),
            "where": where, "per_rep": [f.as_dict() for f in found]}
