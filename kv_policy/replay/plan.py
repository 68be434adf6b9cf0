"""Turn a simulator operation log into concrete slots: which arena slot and which slow-tier slot each op uses.

Done ahead of time so the timed replay loop does no bookkeeping, and so the arena and the
loop device are sized to exactly what the policy's decisions need at peak.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kv_policy import simulator as sim

NO_SLOT = -1
ALIGN = 4096


@dataclass
class Plan:
    """Per op: step, code, block, charge, arena slot, slow slot, bytes moved (rounded up to 4 KiB for O_DIRECT)."""

    step: np.ndarray
    op: np.ndarray
    block: np.ndarray
    charge: np.ndarray
    arena: np.ndarray
    slow: np.ndarray
    nbytes: np.ndarray
    slot_bytes: int
    arena_slots: int
    slow_slots: int

    def __len__(self) -> int:
        return int(self.op.shape[0])


class _Slots:
    """A LIFO free list that grows on demand and remembers its peak."""

    def __init__(self) -> None:
        self.free: list[int] = []
        self.count = 0

    def take(self) -> int:
        if self.free:
            return self.free.pop()
        self.count += 1
        return self.count - 1

    def give(self, slot: int) -> None:
        self.free.append(slot)


def make_plan(ops: dict[str, np.ndarray], block_size: np.ndarray) -> Plan:
    """Assign slots to every op of a recorded simulation."""
    slot_bytes = -(-int(block_size.max(initial=ALIGN)) // ALIGN) * ALIGN
    codes_, blocks = ops["op"].tolist(), ops["block"].tolist()
    n = len(codes_)
    arena_of: dict[int, int] = {}
    slow_of: dict[int, int] = {}
    arena, slow = _Slots(), _Slots()
    out_arena = np.full(n, NO_SLOT, dtype=np.int64)
    out_slow = np.full(n, NO_SLOT, dtype=np.int64)
    for i in range(n):
        c, b = codes_[i], blocks[i]
        if c == sim.OP_HIT:
            if b not in arena_of:  # resident since before the log started: cannot happen, keep safe
                arena_of[b] = arena.take()
            out_arena[i] = arena_of[b]
        elif c in (sim.OP_MISS, sim.OP_PREFETCH):
            if b not in slow_of:  # a block never written out (e.g. read before allocation): give it a slot
                slow_of[b] = slow.take()
            out_slow[i] = slow_of[b]  # the slot stays the block's: a clean copy may be evicted to it again
            arena_of[b] = arena.take()
            out_arena[i] = arena_of[b]
        elif c in (sim.OP_DROP, sim.OP_EVICT_CLEAN):  # no I/O: the arena slot is free again
            out_arena[i] = arena_of.pop(b)
            arena.give(int(out_arena[i]))
        elif c in (sim.OP_ALLOC, sim.OP_RECOMPUTE):
            if b in slow_of:
                slow.give(slow_of.pop(b))
            if b not in arena_of:
                arena_of[b] = arena.take()
            out_arena[i] = arena_of[b]
        elif c in (sim.OP_SPILL_SYNC, sim.OP_SPILL_BG):
            out_arena[i] = arena_of.pop(b)
            arena.give(int(out_arena[i]))
            if b not in slow_of:
                slow_of[b] = slow.take()
            out_slow[i] = slow_of[b]
        elif c == sim.OP_FREE:
            if b in arena_of:
                out_arena[i] = arena_of.pop(b)
                arena.give(int(out_arena[i]))
            if b in slow_of:
                out_slow[i] = slow_of.pop(b)
                slow.give(int(out_slow[i]))
    return Plan(ops["step"], ops["op"], ops["block"], ops["charge"], out_arena, out_slow,
                -(-block_size[ops["block"]].astype(np.int64) // ALIGN) * ALIGN, slot_bytes, max(1, arena.count), max(1, slow.count))
