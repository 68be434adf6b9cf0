"""The fast tier's intent classes registered with mm_intent (kernel_patches/mm_intent), on a kernel that has it.

A class of the intent mapping with `mm_intent` flags has its arena slots registered in /sys/kernel/debug/mm_intent
for kvds's own process (the arena is kvds's memory), through the series' client (qemu_validation/mm_intent_client).
The registry refuses a range that overlaps one already registered (EEXIST), so when slots change class at the end
of a step the process's intents are cleared and the current class map registered again, between steps, never inside
a timed op. Neighbouring slots of one class are one range; an address space holds at most MAX_PER_MM ranges, so
beyond that the highest-priority ranges are kept and the rest counted as dropped.

No journal entry: the series drops a process's intents when it exits, and every intent repetition clears its own
at its end and checks that none are left.
"""
from __future__ import annotations

import os
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


@dataclass
class Registration:
    """One intent repetition's registrations: the slot -> class map, re-registered when it changes."""
    mapping: Mapping
    base: int
    slot_bytes: int
    slots: int
    registry: mic.Registry = field(default_factory=mic.Registry)
    pid: int = field(default_factory=os.getpid)

    def __post_init__(self) -> None:
        self.by_code = intents_by_code(self.mapping)
        self.cls = np.full(self.slots, CLASS_CODES[IntentClass.WARM], dtype=np.uint8)
        self.updates = 0
        self.ranges_max = 0
        self.dropped_max = 0
        self.error: str | None = None  # the first refusal: the repetition registers nothing more after it
        allow_critical_bytes(self.pid, self.slots * self.slot_bytes)  # the budget is the arena, stated
        self.registry.clear(self.pid)

    def apply(self, slots: np.ndarray, codes: np.ndarray) -> None:
        """Slots take their new classes; the registry follows when a registered class is involved."""
        old = self.cls[slots]
        self.cls[slots] = codes
        if any(int(c) in self.by_code for c in np.unique(np.concatenate([old, codes]))):
            self.register()

    def register(self) -> None:
        if self.error is not None:
            return
        entries = mic.block_entries(self.pid, self.base, self.slot_bytes, self._intents(), limit=None)
        keep = sorted(entries, key=lambda e: (-(e.flags & mic.LATENCY_CRITICAL), -e.priority, e.start))
        try:
            self.registry.clear(self.pid)
            self.registry.register_all(keep[:mic.MAX_PER_MM])
        except mic.MmIntentError as exc:  # recorded with the repetition, never silently: its cell says so
            self.error = str(exc)
            return
        self.updates += 1
        self.ranges_max = max(self.ranges_max, min(len(entries), mic.MAX_PER_MM))
        self.dropped_max = max(self.dropped_max, max(0, len(entries) - mic.MAX_PER_MM))

    def _intents(self) -> list[tuple[int, int, int] | None]:
        return [self.by_code.get(int(c)) for c in self.cls]

    def close(self) -> dict[str, Any]:
        """Clear this process's intents; what the repetition did, and how many the dump still lists (0)."""
        self.registry.clear(self.pid)
        left = sum(1 for e in self.registry.dump() if e.pid == self.pid)
        return {"updates": self.updates, "ranges_max": self.ranges_max, "ranges_dropped_max": self.dropped_max,
                "left_after_clear": left, "reclaim_stats": self.registry.stats(), "error": self.error}
