"""Offline references: what the best possible eviction order achieves on a trace, given its whole future.

These are bounds to measure online policies against, never contenders: they read every future access.

* MIN (Belady): evict the resident block whose next access is furthest in the future (a block that is
  never accessed again before it is freed goes first). Bypass: none. Every miss and every allocation
  places the block in the fast tier, exactly as the online policies must, so MIN is the fewest-misses
  schedule among demand-fetch, no-bypass schedules with equal block sizes (generated traces). It never
  prefetches, so a policy that prefetches within the I/O budget can count fewer misses than MIN: MIN
  bounds what eviction alone achieves.
* PrioMIN: the fewest high-priority misses first, then few misses in total: blocks never read again go
  first, then low-priority blocks (priority < 70) before high-priority ones, furthest next use first within
  each band. Its high-priority misses equal the exhaustive minimum; its total is that greedy's (on 1 of 300
  small random traces the exhaustive search found one miss fewer with the same high-priority misses), so
  read its total as an upper bound of the lexicographic optimum.

* RateOracle: evict the block with the lowest true heavy-hitter probability per decode, from the attention model
  that generated the trace (engine.py, `Trace.block_hh_rate`), sink/window blocks last, blocks no request reads first.
  It knows the distribution each decode's heavy hitters are drawn from, not the draws: the best an online estimate
  of per-block rates could do (the optimal eviction under independent references keeps the highest-rate blocks),
  so the distance from it to MIN is what only the future draws explain, and from an online policy to it what a
  better rate estimate could still win. Generated traces only (a trace file carries no such rates).

MIN and PrioMIN are checked against an exhaustive search on 300 small random traces, and MIN against the textbook
reference string (tests/policy/test_policy_offline.py).
"""
from __future__ import annotations

import numpy as np

from harness.errors import UserError
from kv_policy import codes
from kv_policy.policies import Policy
from kv_policy.trace import Trace

HIGH_PRIORITY = 70


def next_use(trace: Trace) -> list[int]:
    """Per event: the index of the block's next ACCESS after it, or len(trace) if it is freed or never read again."""
    n = len(trace)
    never = n
    nxt = [never] * trace.n_blocks
    out = [never] * n
    kinds, blocks = trace.kind.tolist(), trace.block.tolist()
    for i in range(n - 1, -1, -1):
        b = blocks[i]
        out[i] = nxt[b]
        k = kinds[i]
        if k == codes.ACCESS:
            nxt[b] = i
        elif k == codes.FREE:
            nxt[b] = never
    return out


class MIN(Policy):
    """Belady's MIN: evict the furthest next use (offline reference)."""

    name = "MIN"
    reference = True

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.nu = next_use(trace)

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return -self.nu[seq]

    def event_keys(self, trace: Trace) -> np.ndarray:
        """`key` for every event at once."""
        return -np.asarray(self.nu, dtype=np.float64)


class PrioMIN(MIN):
    """High-priority blocks last, MIN order within each band (offline reference)."""

    name = "PrioMIN"

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.never = len(trace)
        self.band = ((trace.block_priority >= HIGH_PRIORITY).astype(np.float64) * (len(trace) + 2)).tolist()

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        nu = self.nu[seq]
        if nu == self.never:  # never read again: free to evict, whatever its band
            return -2.0 * self.never - 4
        return self.band[b] - nu

    def event_keys(self, trace: Trace) -> np.ndarray:
        """`key` for every event at once (the block is the event's own)."""
        nu = np.asarray(self.nu, dtype=np.int64)
        band = np.asarray(self.band, dtype=np.float64)[trace.block]
        return np.where(nu == self.never, -2.0 * self.never - 4, band - nu)


class RateOracle(Policy):
    """Keep the blocks the attention model reads most often per decode (offline reference: the generator's rates)."""

    name = "RateOracle"
    reference = True
    uses_hints = True

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.ek = self.event_keys(trace).tolist()

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return self.ek[seq]

    def event_keys(self, trace: Trace) -> np.ndarray:
        """Per event, its block's key from then on: 2 for a sink/window block, -1 for a shared block no request
        reads (cold-spillable), else its heavy-hitter probability per decode (0..1)."""
        if trace.block_hh_rate is None:
            raise UserError("RateOracle needs a generated trace (the attention model's rates); this one has none")
        rate = trace.block_hh_rate.tolist()
        layout = bytearray(trace.n_blocks)
        out = [0.0] * len(trace)
        for i, (k, b, c, h) in enumerate(zip(trace.kind.tolist(), trace.block.tolist(), trace.critical.tolist(),
                                             trace.cls.tolist())):
            if k == codes.ALLOC:
                layout[b] = 1 if h == codes.DECODE_CRITICAL else 0
            elif k == codes.HINT:
                if c:
                    layout[b] = 1
                elif h == codes.COLD_SPILLABLE:
                    layout[b] = 0
                    out[i] = -1.0
                    continue
                elif h == codes.WARM:
                    layout[b] = 0
            out[i] = 2.0 if layout[b] else rate[b]
        return np.asarray(out, dtype=np.float64)
