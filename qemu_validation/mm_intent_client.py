"""User-space side of the mm_intent debugfs interface: register a KV arena's blocks by intent class.

The kernel series (kernel_patches/mm_intent) only records intents; this helper turns kvds's intent classes
(harness.intent.classify) into mm_intent flags, coalesces neighbouring blocks with the same intent into one range
(the registry is bounded at 4096 entries), and talks to /sys/kernel/debug/mm_intent/{register,dump,clear,lookup}.
Errors come back as MmIntentError carrying the errno and what the series documents it to mean.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from harness.errors import UserError
from harness.intent import IntentClass, KVBlock, classify

DEBUGFS = Path("/sys/kernel/debug/mm_intent")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MAX_ENTRIES = 4096
MAX_PER_MM = 1024
LINE_MAX = 128

LATENCY_CRITICAL, RECLAIMABLE, PREFETCHABLE, RECOMPUTE_OK, BACKGROUND = 0x1, 0x2, 0x4, 0x8, 0x10
VALID_FLAGS = 0x1F

CLASS_FLAGS: dict[IntentClass, int] = {
    IntentClass.DECODE_CRITICAL: LATENCY_CRITICAL,
    IntentClass.PREFETCH_SOON: PREFETCHABLE,
    IntentClass.WARM: 0,
    IntentClass.COLD_SPILLABLE: RECLAIMABLE,
    IntentClass.RECOMPUTE_OK: RECOMPUTE_OK | RECLAIMABLE,
    IntentClass.DONE: BACKGROUND | RECLAIMABLE,
}

# What each errno means for a register write (mm/mm_intent.c documents the same table).
ERRNO_MEANING = {
    errno.E2BIG: "line longer than 128 bytes",
    errno.EBADMSG: "trailing garbage after the six fields",
    errno.EINVAL: "a field is missing or malformed",
    errno.EOPNOTSUPP: "unknown flag bits",
    errno.ERANGE: "zero or overflowing length, or range above the user address space",
    errno.EDOM: "start or length not page-aligned",
    errno.ESRCH: "no such process",
    errno.ENOSPC: "registry full (4096 entries)",
    errno.EDQUOT: "the target's address space already holds 1024 intents, or its latency-critical bytes would pass "
                  "its RLIMIT_MEMLOCK",
    errno.EACCES: "the writer may not ptrace-attach to the target",
    errno.EPERM: "registering for another process needs CAP_SYS_NICE",
    errno.EBUSY: "the target shares its address space with another process, or is inside exec()",
    errno.ENOMEM: "part of the range is not mapped",
    errno.EEXIST: "overlaps a range already registered for this process",
    errno.ENOENT: "no intent covers that address",
}


class MmIntentError(OSError):
    """A rejected mm_intent write; str() names the documented reason."""


@dataclass(frozen=True)
class Entry:
    pid: int
    start: int
    length: int
    flags: int
    deadline_ns: int
    priority: int

    def line(self) -> str:
        """The register line; the dump prints entries in exactly this format."""
        return f"{self.pid} {self.start:#x} {self.length:#x} {self.flags:#x} {self.deadline_ns} {self.priority}\n"

    def covers(self, addr: int) -> bool:
        return self.start <= addr < self.start + self.length


def entry(pid: int, start: int, length: int, flags: int, deadline_ns: int = 0, priority: int = 0) -> Entry:
    """A checked Entry: the same rules the kernel applies, so bad input fails here with a clear message."""
    if pid <= 0:
        raise UserError(f"mm_intent: pid {pid} is not a process id")
    if length <= 0 or start < 0 or start % PAGE_SIZE or length % PAGE_SIZE:
        raise UserError(f"mm_intent: range {start:#x}+{length:#x} must be non-empty and page-aligned")
    if flags & ~VALID_FLAGS or flags < 0:
        raise UserError(f"mm_intent: unknown flag bits in {flags:#x}")
    if not 0 <= priority <= 255 or not 0 <= deadline_ns < 2**64:
        raise UserError("mm_intent: priority must be 0..255 and deadline_ns a u64")
    return Entry(pid, start, length, flags, deadline_ns, priority)


def parse_dump(text: str) -> list[Entry]:
    """Entries from a dump (or lookup) read; a malformed line raises ValueError naming it."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        f = line.split()
        if len(f) != 6 or not all(x.startswith("0x") for x in f[1:4]):
            raise ValueError(f"dump line {n} is not '<pid> <start> <len> <flags> <deadline_ns> <priority>': {line!r}")
        out.append(Entry(int(f[0]), int(f[1], 16), int(f[2], 16), int(f[3], 16), int(f[4]), int(f[5])))
    return out


def block_entries(pid: int, base: int, block_bytes: int, intents: Iterable[tuple[int, int, int] | None],
                  limit: int | None = MAX_PER_MM) -> list[Entry]:
    """Entries for blocks laid out back to back from `base` (block i at base + i * block_bytes), one
    (flags, deadline_ns, priority) per block or None for a block left unregistered; neighbours with the same
    intent are coalesced into one range (the registry holds MAX_PER_MM intents per address space: more than
    `limit` is a UserError; None leaves choosing which to register to the caller)."""
    if block_bytes <= 0 or block_bytes % PAGE_SIZE:
        raise UserError(f"block size {block_bytes} must be a positive multiple of the page size")
    out: list[Entry] = []
    last_block = -2
    for i, intent in enumerate(intents):
        if intent is None:
            continue
        flags, deadline_ns, priority = intent
        e = entry(pid, base + i * block_bytes, block_bytes, flags, deadline_ns, priority)
        last = out[-1] if out else None
        if last and last_block == i - 1 and (last.flags, last.deadline_ns, last.priority) == (
                e.flags, e.deadline_ns, e.priority):
            out[-1] = Entry(pid, last.start, last.length + e.length, e.flags, e.deadline_ns, e.priority)
        else:
            out.append(e)
        last_block = i
    if limit is not None and len(out) > limit:
        raise UserError(f"{len(out)} ranges exceed the {MAX_PER_MM} intents one address space may hold "
                        "(use larger blocks or a smaller arena)")
    return out


def arena_entries(pid: int, base: int, block_bytes: int, blocks: Iterable[KVBlock], current_step: int | None = None,
                  classes: dict[IntentClass, int] | None = None) -> list[Entry]:
    """Entries for KVBlocks laid out back to back from `base`, each by its intent class (harness.intent.classify).

    A block's deadline is its deadline_us in ns (0 when unknown) and its priority its request_priority.
    """
    flags_of = classes or CLASS_FLAGS
    return block_entries(pid, base, block_bytes, (
        (flags_of[classify(b, current_step)], (b.deadline_us or 0) * 1000, max(0, min(255, b.request_priority)))
        for b in blocks))


class Registry:
    """The debugfs files of a kernel carrying the mm_intent series (root only)."""

    def __init__(self, root: Path = DEBUGFS) -> None:
        self.root = root

    def available(self) -> bool:
        return (self.root / "register").exists()

    def _write(self, name: str, line: str, fd: int | None = None) -> None:
        data = line.encode()
        own = fd is None
        if own:
            fd = os.open(self.root / name, os.O_WRONLY)
        try:
            os.write(fd, data)
        except OSError as exc:
            meaning = ERRNO_MEANING.get(exc.errno or 0, exc.strerror)
            raise MmIntentError(exc.errno, f"mm_intent {name} {line.strip()!r}: {meaning}") from None
        finally:
            if own:
                os.close(fd)

    def register(self, e: Entry) -> None:
        self._write("register", e.line())

    def register_all(self, entries: Iterable[Entry]) -> int:
        n = 0
        for e in entries:
            self.register(e)
            n += 1
        return n

    def stats(self) -> dict[str, int] | None:
        """What reclaim did with the intents (the reclaim consumer's `stats`: lookups, protected_folios/pages,
        demoted_folios/pages, summed over CPUs since boot); None on a kernel without the consumer."""
        f = self.root / "stats"
        if not f.exists():
            return None
        out: dict[str, int] = {}
        for n, line in enumerate(f.read_text().splitlines(), start=1):
            k, _, v = line.partition(" ")
            if not v.strip().isdigit():
                raise ValueError(f"mm_intent stats line {n} is not '<name> <count>': {line!r}")
            out[k] = int(v)
        return out

    def dump(self) -> list[Entry]:
        return parse_dump((self.root / "dump").read_text())

    def clear(self, pid: int | None = None) -> None:
        self._write("clear", "all\n" if pid is None else f"{pid}\n")

    def lookup(self, pid: int, addr: int) -> Entry | None:
        """The entry covering addr in pid's address space, or None."""
        fd = os.open(self.root / "lookup", os.O_RDWR)
        try:
            try:
                self._write("lookup", f"{pid} {addr:#x}\n", fd)
            except MmIntentError as exc:
                if exc.errno == errno.ENOENT:
                    return None
                raise
            found = parse_dump(os.pread(fd, 256, 0).decode())
            return found[0] if found else None
        finally:
            os.close(fd)
