"""The arena's blocks registered with mm_intent, the experimental kernel registry (kernel_patches/mm_intent).

A mapping whose classes carry `mm_intent` flags (harness/mappings/mm-intent.toml) has every block of those
classes registered for the arena process, through the series' user-space client
(qemu_validation/mm_intent_client.py: the one place that knows the register line and its errnos; kernel_vm may
import the qemu track, the harness core may not). Neighbouring blocks with the same intent become one range.

The parent writes the lines (debugfs is root-only) naming the arena child's pid. The intents belong to the
child's address space and go when it exits (the series' lifetime rule), so the journal's end of the arena
worker is also their undo; every repetition still clears them itself and checks that none are left.
"""

from __future__ import annotations

import resource

from typing import Any

from harness.errors import UserError
from harness.mapping import Mapping
from kernel_vm.mix import CLASSES, Layout
from qemu_validation import mm_intent_client as mic


def unavailable_reason(area: str = "memory") -> str | None:
    """Why this kernel cannot take registrations (the doctor's reason), None when it can. A probe in error raises:
    a kvds bug is never 'unavailable'."""
    from harness import doctor

    c = doctor.capability("mm_intent", area)
    if c.is_error:
        raise doctor.ProbeError(f"mm_intent: {c.reason}")
    return None if c.ok else f"mm_intent is {c.status} on this host: {c.reason}"


def uses_mm_intent(mapping: Mapping) -> bool:
    return any(mapping.for_class(c).mm_intent for c in CLASSES)


def block_intents(mapping: Mapping, layout: Layout) -> list[tuple[int, int, int] | None]:
    """(flags, deadline_ns, priority) per block from its class's mapping, None for a class left unregistered.
    The mapping gives no deadline: a mapping is static, a deadline is a point in time (0: none)."""
    per_class: list[tuple[int, int, int] | None] = []
    for cls in CLASSES:
        cm = mapping.for_class(cls)
        flags = cm.mm_intent_flags
        per_class.append(None if flags is None else (flags, 0, cm.mm_intent_priority or 0))
    return [per_class[int(i)] for i in layout.block_class]


def plan(mapping: Mapping, layout: Layout, pid: int, base: int) -> list[mic.Entry]:
    """The register lines' entries for an arena mapped at `base` in process `pid` (coalesced, checked)."""
    if layout.page_bytes != mic.PAGE_SIZE:
        raise UserError(f"arena page size {layout.page_bytes} is not this kernel's {mic.PAGE_SIZE}")
    return mic.block_entries(pid, base, layout.block_bytes, block_intents(mapping, layout))


def check_fits(mapping: Mapping, layout: Layout) -> int:
    """The number of ranges the layout registers; UserError before any change when one address space cannot
    hold them (the kernel's EDQUOT)."""
    return len(plan(mapping, layout, 1, 0))


def allow_critical_bytes(pid: int, need: int) -> None:
    """The series bounds an address space's latency-critical bytes by its owner's RLIMIT_MEMLOCK (EDQUOT beyond,
    shown in debugfs mm_intent/budget): the arena process's limit is raised to what the layout registers, so the
    budget is stated, not a default's accident (8 MiB for root here)."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_MEMLOCK)
    if soft != resource.RLIM_INFINITY and soft < need:
        new_hard = hard if hard == resource.RLIM_INFINITY else max(hard, need)
        resource.prlimit(pid, resource.RLIMIT_MEMLOCK, (need, new_hard))


def register(mapping: Mapping, layout: Layout, pid: int, base: int,
             registry: mic.Registry | None = None) -> dict[str, Any]:
    """Register the arena's blocks; the kernel's dump must then list exactly these ranges for the process."""
    reg = registry or mic.Registry()
    entries = plan(mapping, layout, pid, base)
    allow_critical_bytes(pid, sum(e.length for e in entries))
    reg.register_all(entries)
    dumped = [e for e in reg.dump() if e.pid == pid]
    if dumped != entries:
        raise RuntimeError(f"mm_intent dump for pid {pid} lists {len(dumped)} ranges, not the {len(entries)} "
                           "registered ones")
    by_flags: dict[str, int] = {}
    for e in entries:
        by_flags[f"{e.flags:#x}"] = by_flags.get(f"{e.flags:#x}", 0) + e.length
    return {"ranges": len(entries), "registered_bytes": sum(e.length for e in entries), "bytes_by_flags": by_flags,
            "first_lines": [e.line().strip() for e in entries[:3]]}


def reclaim_stats(registry: mic.Registry | None = None) -> dict[str, int] | None:
    """The reclaim consumer's counters (system-wide; in the guest lab only the arena has intents), or None on a
    kernel whose registry nothing in reclaim reads."""
    return (registry or mic.Registry()).stats()


def clear(pid: int, registry: mic.Registry | None = None) -> int:
    """Clear the process's intents; returns how many the dump still lists for it (0 unless the kernel failed)."""
    reg = registry or mic.Registry()
    reg.clear(pid)
    return sum(1 for e in reg.dump() if e.pid == pid)
