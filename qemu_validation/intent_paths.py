"""What DAMOS pageout and KSM merging do to a latency-critical range, per kernel, run in the guest lab.

The mm_intent reference check runs only where reclaim checks references: which of DAMOS's two pageout paths
(virtual addresses: MADV_PAGEOUT on the target; physical addresses: reclaim_pages() directly) pass through it
changed at Linux 6.9, and a KSM-merged page is one folio behind several mappings. guest/intent_paths.c does each
case and reports pagemap residency; this module boots a kernel, runs the cases and parses what they printed, so
the documentation says per kernel what was seen."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from qemu_validation.boot import guest_command, guest_programs, runner

SOURCE = Path(__file__).parent / "guest" / "intent_paths.c"
GUEST_PATH = "bin/intent_paths"
CASES = ("damos-vaddr", "damos-paddr", "ksm", "ksm-one-critical")
PAGES = 128  # per range (guest/intent_paths.c PAGES)
_LINE = re.compile(r"^intent_paths (\S+) (.*)$", re.M)
_FIELD = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class PathsRun:
    """One boot's cases: each case's fields (release, <range>_present, <range>_swapped, ...) and the boot."""
    cases: dict[str, dict[str, str | int]]
    failed: dict[str, int]       # case -> the program's exit status, for every case that did not exit 0
    stderr: str
    boot: runner.BootResult


def parse(text: str) -> tuple[dict[str, dict[str, str | int]], dict[str, int]]:
    """Each reported case's fields (integers where they are) and the exit status of each case that failed."""
    cases: dict[str, dict[str, str | int]] = {}
    failed: dict[str, int] = {}
    for m in _LINE.finditer(text):
        fields = {k: int(v) if v.isdigit() else v for k, v in _FIELD.findall(m.group(2))}
        if "failed" in fields:
            failed[m.group(1)] = int(fields["failed"])
        else:
            cases[m.group(1)] = fields
    return cases, failed


def guest_script(cases: tuple[str, ...]) -> str:
    """Each case in its own process (its arena, memory cgroup and kdamond gone before the next), status kept."""
    lines = [f"/{GUEST_PATH} {c} >> /share/out.txt 2>> /share/err.txt || echo \"intent_paths {c} failed=$?\" "
             ">> /share/out.txt" for c in cases]
    return "; ".join(lines)


def run(kernel_id: str, cases: tuple[str, ...], share: Path, timeout: float = 900) -> PathsRun:
    """Boot `kernel_id` once and run `cases` in order (TCG is enough: the figures are page counts, not times)."""
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise ValueError(f"unknown intent_paths case(s): {', '.join(unknown)}")
    res = guest_command.boot_and_run(kernel_id, ["sh", "-c", guest_script(cases)], share, timeout=timeout,
                                     files={GUEST_PATH: guest_programs.static_binary(SOURCE)})
    out = share / "out.txt"
    err = share / "err.txt"
    parsed, failed = parse(out.read_text(errors="replace") if out.exists() else "")
    return PathsRun(parsed, failed, err.read_text(errors="replace") if err.exists() else "", res)


def pageout_keeps_critical(release: str) -> bool:
    """Whether DAMOS/MADV_PAGEOUT pass the folios they isolate through the reference check: up to Linux 6.8 they
    do (a folio only latency-critical ranges map is kept); from 6.9 reclaim_pages() ignores references."""
    m = re.match(r"(\d+)\.(\d+)", release)
    if not m:
        raise ValueError(f"cannot read a version in {release!r}")
    return (int(m.group(1)), int(m.group(2))) <= (6, 8)


__all__ = ["CASES", "PAGES", "PathsRun", "guest_script", "pageout_keeps_critical", "parse", "run"]
