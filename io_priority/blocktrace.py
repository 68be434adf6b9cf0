"""Which I/O priority each request carried when the block layer issued it (`block:block_rq_issue`), and how
long the device held it (issue -> `block:block_rq_complete`, paired by direction and sector): the fourth clock.

A tracefs instance of our own (`instances/kvds-<pid>-<token>`, under a tracefs mount of our own, both created
through the journal so restore removes them) with the event filtered to one device: other users of tracefs and
other devices are not disturbed. The ring buffer is read after each repetition (not during it, so parsing costs
no CPU while latency is measured). The instance's trace clock is `mono` (CLOCK_MONOTONIC, what ioload stamps its
reads with), so a slow read can be placed before or inside the device.
"""

from __future__ import annotations

import os
import re
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.ioprio import CLASS_NAMES
from harness.knobs import create_dir, mount
from harness.paths import work_dir

# "7,3 RS 16384 () 2048 + 32 rt,0,0 [ioload]"  (dev, rwbs, bytes, cmd, sector + n, class,hint,level, comm)
_LINE = re.compile(r"block_rq_issue: (\d+),(\d+) (\S+) (\d+) \(.*?\) \d+ \+ \d+ (\w+),\d+,(\d+) \[(.*?)\]")
# "  123.456789: block_rq_complete: 7,3 RS () 2048 + 32 rt,0,0 [0]" (issue lines carry bytes before "()")
_EVENT = re.compile(r"\s(\d+)\.(\d+): block_rq_(issue|complete): (\d+),(\d+) (\S+) (?:\d+ )?\(.*?\) (\d+) \+ \d+ "
                    r"(\w+),\d+,(\d+) ")
CLASS_CODES = {"none": 0, "rt": 1, "be": 2, "idle": 3}
OPS = ("R", "W", "other")
_WRITTEN = re.compile(r"entries-in-buffer/entries-written: (\d+)/(\d+)")


def kernel_dev_t(major: int, minor: int) -> int:
    """The kernel's internal dev_t (MKDEV: major << 20 | minor), as the event filter compares it."""
    return (major << 20) | minor


@dataclass
class IssueCounts:
    """Requests issued per direction ("R", "W", "other") and priority ("rt/0"), plus events the buffer lost."""

    by_op: dict[str, Counter[str]] = field(default_factory=dict)
    lost: int = 0
    comms: Counter[str] = field(default_factory=Counter)
    # (op, "class/level") -> issuing task names: who carried a write at be/4 (the writer, or a kworker)
    comms_by_prio: dict[str, Counter[str]] = field(default_factory=dict)
    # issue -> complete pairs, one row each: issue_ns, complete_ns, op (index in OPS), class code, level
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), dtype=np.int64))

    def add(self, op: str, prio: str, comm: str) -> None:
        self.by_op.setdefault(op, Counter())[prio] += 1
        self.comms[comm] += 1
        self.comms_by_prio.setdefault(f"{op} {prio}", Counter())[_task_kind(comm)] += 1

    def as_dict(self) -> dict[str, object]:
        return {"by_op": {op: dict(c) for op, c in sorted(self.by_op.items())}, "lost_events": self.lost,
                "issuers": dict(self.comms.most_common(8)),
                "issuers_by_prio": {k: dict(c) for k, c in sorted(self.comms_by_prio.items())}}

    def classes(self, op: str) -> set[str]:
        return set(self.by_op.get(op, {}))


def _task_kind(comm: str) -> str:
    """kworker/u4:2 -> kworker: per-CPU worker names differ by run; the kind is what matters."""
    return comm.split("/")[0] if comm.startswith(("kworker", "kblockd", "loop")) else comm


def _op(rwbs: str) -> str:
    return "R" if "R" in rwbs else ("W" if "W" in rwbs else "other")


def parse_trace(text: str) -> IssueCounts:
    out = IssueCounts()
    m = _WRITTEN.search(text)
    if m:
        out.lost = max(0, int(m.group(2)) - int(m.group(1)))
    open_: dict[tuple[str, int], tuple[int, str, int]] = {}  # (op, sector) -> issue time, class, level
    rows: list[tuple[int, int, int, int, int]] = []
    for line in text.splitlines():
        m = _LINE.search(line)
        if m:
            klass = m.group(5)
            name = klass if klass in CLASS_NAMES.values() else klass
            out.add(_op(m.group(3)), f"{name}/{m.group(6)}", m.group(7))
        e = _EVENT.search(line)
        if not e:
            continue
        ts = int(e.group(1)) * 1_000_000_000 + int(e.group(2).ljust(9, "0")[:9])
        key = (_op(e.group(6)), int(e.group(7)))
        if e.group(3) == "issue":
            open_[key] = (ts, e.group(8), int(e.group(9)))
        elif key in open_:
            t0, klass, level = open_.pop(key)
            rows.append((t0, ts, OPS.index(key[0]), CLASS_CODES.get(klass, 0), level))
    if rows:
        out.pairs = np.array(rows, dtype=np.int64)
    return out


def class_name(code: int) -> str:
    return {v: k for k, v in CLASS_CODES.items()}.get(int(code), "none")


def tracefs_missing() -> str | None:
    """Why this kernel cannot record block-layer events (None when it can): without ftrace there is no tracefs (the
    io lab kernel leaves ftrace out: a full rebuild for figures the verdicts do not use)."""
    try:
        names = {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines() if line.strip()}
    except OSError as exc:
        return f"/proc/filesystems unreadable ({exc.strerror})"
    return None if "tracefs" in names else "this kernel has no tracefs (built without CONFIG_FTRACE)"


class BlockIssueTrace:
    """block_rq_issue/complete on one device in a private tracefs instance; `collect()` returns and clears the
    counts and the issue -> complete pairs."""

    EVENTS = ("block_rq_issue", "block_rq_complete")

    def __init__(self, major: int, minor: int, buffer_kb: int = 65536) -> None:
        token = f"{os.getpid()}-{secrets.token_hex(3)}"
        # A private tracefs mount point: a shared /sys/kernel/tracing can be unmounted by whichever process
        # mounted it when that process restores its journal, taking our instance with it mid-run.
        root = create_dir(work_dir() / f"tracefs-{token}")
        mount("tracefs", str(root))
        self.dir = create_dir(root / "instances" / f"kvds-{token}")
        # Settings inside our own instance vanish with it (restore removes the instance): not journaled one by one.
        (self.dir / "buffer_size_kb").write_text(str(buffer_kb))
        (self.dir / "trace_clock").write_text("mono")  # the clock ioload's reads are stamped with
        for name in self.EVENTS:
            ev = self.dir / "events" / "block" / name
            (ev / "filter").write_text(f"dev == {kernel_dev_t(major, minor)}")
            (ev / "enable").write_text("1")
        (self.dir / "tracing_on").write_text("1")
        self.clear()

    def clear(self) -> None:
        with open(self.dir / "trace", "w"):
            pass  # opening for write with O_TRUNC empties the instance's ring buffer

    def collect(self) -> IssueCounts:
        counts = parse_trace((self.dir / "trace").read_text(errors="replace"))
        self.clear()
        return counts

    def close(self) -> None:
        (self.dir / "tracing_on").write_text("0")
        for name in self.EVENTS:
            (self.dir / "events" / "block" / name / "enable").write_text("0")
