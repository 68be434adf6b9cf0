"""The arena of `kvds vm overcommit`: more latency-critical memory than the budget holds.

A share of the blocks is latency-critical, ranked into TIERS tiers of equal size (tier 0 yields first: the farthest
deadline, or the lowest priority; tier TIERS-1 is the one decoded next), the rest is spillable. Blocks are dealt out
by a seeded shuffle, so position tells reclaim nothing. With the budget below the critical bytes, every mechanism
must give up some critical memory; the question is which.

Mechanisms (what each tells the kernel; all but `memcg` keep the arena in one memory cgroup):
- none: nothing (the plain LRU).
- mlock: mlock(2) on every critical block (binary: all of it stays, or the group's limit cannot be met).
- memcg: critical and spillable blocks charged to two children of a group limited to the budget, the critical
  child protected by memory.low = the budget (cgroup v2). memory.low / memory.min protect a group as a whole:
  inside it reclaim goes by LRU age.
- madvise-cold: MADV_COLD on the lower half of the tiers (the application ranks the ranges itself, once).
- mm-intent: every critical block registered LATENCY_CRITICAL with its tier's deadline or priority, spillable ones
  RECLAIMABLE; what reclaim does with the rank is the kernel's (kernel_patches/mm_intent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import UserError
from qemu_validation import mm_intent_client as mic

TIERS = 4
MECHANISMS = ("none", "mlock", "memcg", "madvise-cold", "mm-intent")
RANKS = ("deadline", "priority")
SPILL = -1
STEP_NS = 25_000_000
"""Deadlines are TIERS - tier decode steps of this length from registration (tier TIERS-1: the next step)."""


@dataclass(frozen=True)
class Geometry:
    n_blocks: int
    block_bytes: int
    page_bytes: int
    critical_pct: float
    seed: int = 0
    rank: str = "deadline"

    def check(self) -> None:
        if self.rank not in RANKS:
            raise UserError(f"--rank must be one of {', '.join(RANKS)}, not {self.rank!r}")
        if not 0 < self.critical_pct < 100:
            raise UserError(f"--critical {self.critical_pct:g} must be in (0, 100)")
        if self.critical_blocks() < TIERS:
            raise UserError(f"{self.critical_blocks()} critical blocks cannot fill {TIERS} tiers")

    @property
    def pages_per_block(self) -> int:
        return self.block_bytes // self.page_bytes

    @property
    def arena_bytes(self) -> int:
        return self.n_blocks * self.block_bytes

    def critical_blocks(self) -> int:
        return int(round(self.n_blocks * self.critical_pct / 100.0))

    def block_tier(self) -> np.ndarray:
        """Per block its tier (0..TIERS-1) or SPILL, shuffled by seed; tiers differ in size by at most one block."""
        n = self.critical_blocks()
        tiers = np.concatenate([np.arange(n) * TIERS // n, np.full(self.n_blocks - n, SPILL)])
        return np.random.default_rng(self.seed).permutation(tiers)

    def intent(self, tier: int, t0_ns: int) -> tuple[int, int, int]:
        """(flags, deadline_ns, priority) for a block of `tier` (SPILL: reclaimable, no deadline)."""
        if tier == SPILL:
            return mic.RECLAIMABLE, 0, 0
        if self.rank == "deadline":
            return mic.LATENCY_CRITICAL, t0_ns + (TIERS - tier) * STEP_NS, 128
        return mic.LATENCY_CRITICAL, 0, 64 * tier + 63

    def entries(self, pid: int, base: int, t0_ns: int) -> list[mic.Entry]:
        return mic.block_entries(pid, base, self.block_bytes,
                                 (self.intent(int(t), t0_ns) for t in self.block_tier().tolist()))

    def budget_bytes(self, pressure_pct: float) -> int:
        return int(self.arena_bytes * (1 - pressure_pct / 100.0))

    def check_overcommitted(self, pressure_pct: float) -> None:
        """UserError unless the budget is below the critical bytes (else this is not the experiment)."""
        critical = self.critical_blocks() * self.block_bytes
        if self.budget_bytes(pressure_pct) >= critical:
            raise UserError(f"--pressure {pressure_pct:g}% leaves {self.budget_bytes(pressure_pct) >> 10} KiB, "
                            f"enough for all {critical >> 10} KiB of critical blocks: raise --pressure or --critical")



def block_worst(latency_ns: np.ndarray, pages_per_block: int) -> np.ndarray:
    """Per block (in the order read) its slowest page read: a block is late when any of its pages is."""
    return latency_ns.reshape(-1, pages_per_block).max(axis=1)
