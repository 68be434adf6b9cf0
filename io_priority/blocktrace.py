"""Which I/O priority each request carried when the block layer issued it (`block:block_rq_issue`).

A tracefs instance of our own (`instances/kvds-<pid>-<token>`, under a tracefs mount of our own, both created
through the journal so restore removes them) with the event filtered to one device: other users of tracefs and other devices are not disturbed. The
ring buffer is read after each repetition (not during it, so parsing costs no CPU while latency is measured).
"""

from __future__ import annotations

import os
import re
import secrets
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.ioprio import CLASS_NAMES
from harness.knobs import create_dir, mount
from harness.paths import work_dir

# "7,3 RS 16384 () 2048 + 32 rt,0,0 [ioload]"  (dev, rwbs, bytes, cmd, sector + n, class,hint,level, comm)
_LINE = re.compile(r"block_rq_issue: (\d+),(\d+) (\S+) (\d+) \(.*?\) \d+ \+ \d+ (\w+),\d+,(\d+) \[(.*?)\]")
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


def parse_trace(text: str) -> IssueCounts:
    out = IssueCounts()
    m = _WRITTEN.search(text)
    if m:
        out.lost = max(0, int(m.group(2)) - int(m.group(1)))
    for line in text.splitlines():
        m = _LINE.search(line)
        if not m:
            continue
        rwbs = m.group(3)
        op = "R" if "R" in rwbs else ("W" if "W" in rwbs else "other")
        klass = m.group(5)
        name = klass if klass in CLASS_NAMES.values() else klass
        out.add(op, f"{name}/{m.group(6)}", m.group(7))
    return out


class BlockIssueTrace:
    """block_rq_issue on one device in a private tracefs instance; `collect()` returns and clears the counts."""

    def __init__(self, major: int, minor: int, buffer_kb: int = 32768) -> None:
        token = f"{os.getpid()}-{secrets.token_hex(3)}"
        # A private tracefs mount point: a shared /sys/kernel/tracing can be unmounted by whichever process
        # mounted it when that process restores its journal, taking our instance with it mid-run.
        root = create_dir(work_dir() / f"tracefs-{token}")
        mount("tracefs", str(root))
        self.dir = create_dir(root / "instances" / f"kvds-{token}")
        ev = self.dir / "events" / "block" / "block_rq_issue"
        # Settings inside our own instance vanish with it (restore removes the instance): not journaled one by one.
        (self.dir / "buffer_size_kb").write_text(str(buffer_kb))
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
        (self.dir / "events" / "block" / "block_rq_issue" / "enable").write_text("0")
