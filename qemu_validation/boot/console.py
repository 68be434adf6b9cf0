"""Find kernel splats in a guest's serial console: oops, BUG, KASAN reports, lockdep splats, WARN, panics.

A run whose command exits 0 still fails when any of these appear, because a kernel bug hit while serving the
command is the thing this harness exists to catch. Patterns follow the kernel's own report headers
(lib/bug.c, mm/kasan/report.c, kernel/locking/lockdep.c, arch/x86/kernel/dumpstack.c), as syzkaller matches them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

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
    return findings


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
