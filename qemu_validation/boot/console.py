"""Find kernel splats in a guest's serial console: oops, BUG, KASAN reports, lockdep splats, WARN, panics.

A run whose command exits 0 still fails when any of these appear, because a kernel bug hit while serving the
command is the thing this harness exists to catch. Patterns follow the kernel's own report headers
(lib/bug.c, mm/kasan/report.c, kernel/locking/lockdep.c, arch/x86/kernel/dumpstack.c), as syzkaller matches them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

# A printk timestamp ("[    1.234567] ") and an optional caller id ("[T1] ") in front of each line.
_PREFIX = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?(?:\[\s*[TC]\d+\]\s*)?")

# Checked in order: the first pattern that matches a line names its kind.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kasan", re.compile(r"BUG: KASAN: ")),
    ("lockdep", re.compile(
        r"WARNING: (possible circular locking dependency|possible recursive locking|inconsistent lock state"
        r"|bad unlock balance|suspicious RCU usage|lock held when returning to user space"
        r"|held lock freed|possible irq lock inversion|.*lock.* detected)"
        # A lock used before it was initialized: lockdep reports it and turns itself off (kernel/locking/lockdep.c).
        r"|INFO: trying to register non-static key"
        r"|DEBUG_LOCKS_WARN_ON|BUG: (sleeping function called from invalid context|scheduling while atomic"
        r"|lock held when returning|looking up invalid subclass|MAX_LOCKDEP)")),
    ("panic", re.compile(r"Kernel panic - not syncing")),
    ("oops", re.compile(r"Oops: |general protection fault|stack segment: ")),
    ("bug", re.compile(r"kernel BUG at |BUG: ")),
    ("warn", re.compile(r"WARNING: CPU: \d+ PID: \d+ at |WARNING: at ")),
    ("ubsan", re.compile(r"UBSAN: ")),
    ("stall", re.compile(r"rcu: INFO: .*detected stalls?|INFO: task .* blocked for more than"
                         r"|watchdog: BUG: soft lockup")),
    # A scan that found leaks, and kmemleak switching itself off (then leaks go unseen: also a failure).
    ("kmemleak", re.compile(r"kmemleak: (\d+ new suspected memory leaks|Kernel memory leak detector disabled"
                            r"|Cannot allocate a kmemleak_object structure|Memory pool empty)")),
)


# The OOM killer found no task to kill. Once, in a write that lowers a limit, it is harmless (the write gives up).
# Repeated, it is a fault that retries for ever: a memory cgroup over a limit it cannot reclaim down to, whose
# subtree holds no killable task, fails every charge (mm/memory.c "VM_FAULT_OOM leaked out ... Retrying PF"), and
# the guest never gets further. The runner ends such a guest instead of waiting out its timeout.
OOM_NO_VICTIM = "Out of memory and no killable processes"
LIVELOCK_REPEATS = 50


@dataclass(frozen=True)
class Finding:
    kind: str
    line_no: int
    line: str
    context: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n"))


def scan(text: str, context_lines: int = 12) -> list[Finding]:
    """All splats in a console log, in order; one finding per report (not per matching line)."""
    lines = [strip_prefix(raw) for raw in text.splitlines()]
    findings: list[Finding] = []
    last_end = -1
    for i, line in enumerate(lines):
        kind = classify(line)
        if kind is None or i <= last_end:  # nothing, or a line inside the report already recorded
            continue
        findings.append(Finding(kind, i + 1, line, "\n".join(lines[i : i + context_lines])))
        last_end = _report_end(lines, i)
    livelock = oom_livelock(lines)
    return findings if livelock is None else sorted([*findings, livelock], key=lambda f: f.line_no)


def oom_livelock(lines: list[str]) -> Finding | None:
    """An "oom-livelock" finding when the OOM killer found nothing to kill LIVELOCK_REPEATS times or more; its
    context is the last such report (the one that repeats: who asked, the call trace) up to its verdict line."""
    hits = [i for i, line in enumerate(lines) if line.startswith(OOM_NO_VICTIM)]
    if len(hits) < LIVELOCK_REPEATS:
        return None
    last = hits[-1]
    start = next((j for j in range(last, max(-1, last - 80), -1) if "invoked oom-killer" in lines[j]), last)
    return Finding("oom-livelock", last + 1, f"{lines[last]} ({len(hits)} times)",
                   "\n".join(lines[start : last + 1]))


class LivelockWatch:
    """Follows a growing console log and counts OOM_NO_VICTIM: the runner polls it while QEMU runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._offset = 0
        self._carry = b""

    def poll(self) -> bool:
        """Whether the count has reached LIVELOCK_REPEATS (reads only what was appended since the last poll)."""
        marker = OOM_NO_VICTIM.encode()
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return False
        self._offset += len(chunk)
        data = self._carry + chunk  # the carry is shorter than the marker: nothing is counted twice
        self.count += data.count(marker)
        self._carry = data[-(len(marker) - 1):]
        return self.count >= LIVELOCK_REPEATS


def classify(line: str) -> str | None:
    """The kind of splat a single (prefix-stripped) console line starts, or None."""
    for kind, pat in _PATTERNS:
        if pat.search(line):
            return kind
    return None


def _report_end(lines: list[str], start: int) -> int:
    """Index of the last line of the report starting at `start` (its end marker, or a short window)."""
    for j in range(start + 1, min(len(lines), start + 400)):
        if lines[j].startswith(("---[ end trace", "=" * 20)) and j > start + 1:
            return j
    return start + 2
