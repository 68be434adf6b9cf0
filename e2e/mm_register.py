"""The fast tier's intent classes registered with mm_intent (kernel_patches/mm_intent), on a kernel that has it.

A class of the intent mapping with `mm_intent` flags has its arena slots registered in /sys/kernel/debug/mm_intent
for kvds's own process (the arena is kvds's memory), through the series' client (qemu_validation/mm_intent_client).
Between steps, never inside a timed op, the registry follows the slots whose class changed at the end of the step,
by a delta where the series allows one: a step whose changed slots were all unregistered before (nothing to take
back) registers only their new ranges. The series removes intents only per process (`clear`) or by unmapping, so a
step in which a registered slot changes class (a decode-critical slot turning warm, say) clears the process's
intents and registers the whole class map again. Neighbouring slots of one class are one range; an address space
holds at most MAX_PER_MM ranges, so beyond that the highest-priority ranges are kept and the rest counted as dropped
(a delta that would pass the cap is done as a whole re-registration, which coalesces).

No journal entry: the series drops a process's intents when it exits, and every intent repetition clears its own
at its end and checks that none are left.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.intent import IntentClass
from harness.mapping import Mapping
from kernel_vm.mm_intent import allow_critical_bytes
from qemu_validation import mm_intent_client as mic
from e2e.intents import CLASS_CODES


def intents_by_code(mapping: Mapping) -> dict[int, tuple[int, int, int]]:
    """Class code -> (flags, deadline_ns, priority) for the classes the mapping registers."""
    out = {}
    for cls in IntentClass:
        cm = mapping.for_class(cls)
        if cm.mm_intent_flags is not None:
            out[CLASS_CODES[cls]] = (cm.mm_intent_flags, 0, cm.mm_intent_priority or 0)
    return out


def unavailable_reason() -> str | None:
    """Why this kernel takes no registrations (None: it does). No registry means no series: not an error."""
    reg = mic.Registry()
    return None if reg.available() else f"this kernel has no mm_intent registry ({reg.root / 'register'} is absent)"


NONE = 255
"""A slot with no registered intent (in Registration.held)."""


def runs(codes: np.ndarray, mask: np.ndarray) -> list[tuple[int, int, int]]:
    """(first slot, slots, code) of each maximal run of neighbouring slots where `mask` holds and `codes` is equal."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return []
    brk = np.flatnonzero((np.diff(idx) != 1) | (np.diff(codes[idx].astype(np.int16)) != 0)) + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk, [idx.size]])
    return [(int(idx[a]), int(b - a), int(codes[idx[a]])) for a, b in zip(starts, ends)]


@dataclass
class Registration:
    """One intent repetition's registrations: the slot -> class map, and what the registry holds of it."""
    mapping: Mapping
    base: int
    slot_bytes: int
    slots: int
    registry: mic.Registry = field(default_factory=mic.Registry)
    pid: int = field(default_factory=os.getpid)

    def __post_init__(self) -> None:
        self.by_code = intents_by_code(self.mapping)
        self.registered = np.zeros(256, dtype=bool)
        self.registered[list(self.by_code)] = True
        self.cls = np.full(self.slots, CLASS_CODES[IntentClass.WARM], dtype=np.uint8)
        self.held = np.full(self.slots, NONE, dtype=np.uint8)   # the code each slot is registered under
        self.entries = 0          # ranges the registry holds for this process
        self.updates = 0          # steps the registry was brought up to date
        self.full = 0             # of which by clear + the whole class map
        self.writes = 0           # register writes
        self.seconds = 0.0        # spent bringing the registry up to date (between steps)
        self.ranges_max = 0
        self.dropped_max = 0
        self.error: str | None = None  # the first refusal: the repetition registers nothing more after it
        allow_critical_bytes(self.pid, self.slots * self.slot_bytes)  # the budget is the arena, stated
        self.registry.clear(self.pid)
        self.stats_before = self.registry.stats()

    def apply(self, slots: np.ndarray, codes: np.ndarray) -> None:
        """Slots take their new classes; the registry follows (a delta where nothing registered must go)."""
        self.cls[slots] = codes
        if self.error is not None:
            return
        want = np.where(self.registered[self.cls], self.cls, NONE).astype(np.uint8)
        changed = want != self.held
        if not changed.any():
            return
        t0 = time.perf_counter()
        if (self.held[changed] == NONE).all():
            new = runs(want, changed)
            if self.entries + len(new) <= mic.MAX_PER_MM:
                self._write(new, clear=False)
            else:
                self._write(runs(want, want != NONE), clear=True)
        else:
            self._write(runs(want, want != NONE), clear=True)
        self.seconds += time.perf_counter() - t0

    def _write(self, ranges: list[tuple[int, int, int]], clear: bool) -> None:
        total = (0 if clear else self.entries) + len(ranges)
        if clear:  # keep the most important ranges when the class map has more than an address space may hold
            ranges = sorted(ranges, key=lambda r: (-(self.by_code[r[2]][0] & mic.LATENCY_CRITICAL),
                                                   -self.by_code[r[2]][2], r[0]))[:mic.MAX_PER_MM]
        try:
            if clear:
                self.registry.clear(self.pid)
                self.held[:] = NONE
                self.entries = 0
            for first, n, code in ranges:
                flags, deadline_ns, priority = self.by_code[code]
                self.registry.register(mic.Entry(self.pid, self.base + first * self.slot_bytes, n * self.slot_bytes,
                                                 flags, deadline_ns, priority))
                self.held[first:first + n] = code
                self.entries += 1
                self.writes += 1
        except mic.MmIntentError as exc:  # recorded with the repetition, never silently: its cell says so
            self.error = str(exc)
            return
        self.updates += 1
        self.full += int(clear)
        self.ranges_max = max(self.ranges_max, self.entries)
        self.dropped_max = max(self.dropped_max, total - self.entries)

    def close(self) -> dict[str, Any]:
        """Clear this process's intents; what the repetition did, how many the dump still lists (0), and what reclaim
        did with the registry meanwhile (its stats' change over the repetition: `lookups` > 0 means reclaim
        consulted it)."""
        self.registry.clear(self.pid)
        left = sum(1 for e in self.registry.dump() if e.pid == self.pid)
        after = self.registry.stats()
        delta = {k: v - (self.stats_before or {}).get(k, 0) for k, v in after.items()} if after is not None else None
        return {"updates": self.updates, "full_updates": self.full, "writes": self.writes,
                "register_seconds": self.seconds, "ranges_max": self.ranges_max,
                "ranges_dropped_max": self.dropped_max, "left_after_clear": left, "reclaim_stats": delta,
                "lookups": (delta or {}).get("lookups"), "error": self.error}
