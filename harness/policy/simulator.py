"""Two-tier KV placement simulator: runs one policy over one trace and prices every move.

Cost model (README.md "Simulator"): a decode step reads its decode-critical blocks one
after another; a hit costs a fast-tier read, a miss a slow-tier read plus any spill
writes needed to make room (write-back before reuse). Allocations that force spills pay
them on the same step. Prefetches and the spills they cause overlap compute, so they are
counted but not charged to the step.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from harness.errors import UserError
from harness.policy import codes
from harness.policy.policies import Policy
from harness.policy.tiers import TierModel
from harness.policy.trace import Trace

HIGH_PRIORITY = 70  # accesses of requests at or above this priority are also counted separately

# Operation codes recorded for replay.
OP_HIT, OP_MISS, OP_ALLOC, OP_SPILL_SYNC, OP_SPILL_BG, OP_PREFETCH, OP_FREE = range(7)
OP_NAMES = ("hit", "miss", "alloc", "spill-sync", "spill-bg", "prefetch", "free")
# Op charge flags: background work, on the step's critical path, or a decode-critical access.
BACKGROUND, CHARGED, DC_ACCESS = 0, 1, 2


@dataclass
class SimResult:
    """Counts and per-step latencies of one (trace, policy) run."""

    policy: str
    dc_accesses: int = 0
    dc_misses: int = 0
    hi_accesses: int = 0
    hi_misses: int = 0
    accesses: int = 0
    misses: int = 0
    spills: int = 0
    spill_bytes: int = 0
    prefetches: int = 0
    prefetch_used: int = 0
    step_latency_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ops: dict[str, np.ndarray] | None = None

    @property
    def dc_miss_ratio(self) -> float:
        """Decode-critical misses per decode-critical access."""
        return self.dc_misses / self.dc_accesses if self.dc_accesses else 0.0

    @property
    def hi_miss_ratio(self) -> float:
        return self.hi_misses / self.hi_accesses if self.hi_accesses else 0.0


def simulate(trace: Trace, policy: Policy, tiers: TierModel, record: bool = False) -> SimResult:
    """Run `policy` over `trace`; with `record`, also return the operation log replay executes."""
    policy.bind(trace)
    res = SimResult(policy.name)
    steps, kinds = trace.step.tolist(), trace.kind.tolist()
    blocks, crits, hints = trace.block.tolist(), trace.critical.tolist(), trace.cls.tolist()
    size = trace.block_size.tolist()
    hi = (trace.block_priority >= HIGH_PRIORITY).tolist()
    nb = trace.n_blocks
    loc = bytearray(nb)
    cls = bytearray([codes.WARM]) * nb
    prefetched = bytearray(nb)
    cur_seq = [-1] * nb          # push id of a block's live heap entry
    heap: list[tuple[float, int, int]] = []
    spilled: list[tuple[float, int, int]] = []  # PredictiveHotness: (predicted step, push id, block)
    fast, slow = tiers.fast, tiers.slow
    cap, slow_cap = tiers.fast_capacity, tiers.slow_capacity
    used = slow_used = 0
    push_id = 0
    key, on_access = policy.key, policy.on_access
    uses_hints, prefetch_on_hint = policy.uses_hints, policy.prefetch_on_hint
    predictive = policy.predictive_prefetch
    ops_step: list[int] = []
    ops_op: list[int] = []
    ops_block: list[int] = []
    ops_charge: list[int] = []
    lat: list[float] = []
    step_cost = 0.0
    step_dc = False
    cur_step = steps[0] if steps else 0

    def op(code: int, b: int, charge: int = 0) -> None:
        ops_step.append(cur_step)
        ops_op.append(code)
        ops_block.append(b)
        ops_charge.append(charge)

    def evict_for(need: int, sync: bool, guard: float | None) -> float | None:
        """Spill victims until `need` bytes fit; None if a prefetch would evict a better block."""
        nonlocal used, slow_used
        cost = 0.0
        while used + need > cap:
            while heap:
                k, pid, v = heap[0]
                if loc[v] == codes.LOC_FAST and cur_seq[v] == pid:
                    break
                heapq.heappop(heap)
            if not heap:
                raise UserError(f"fast tier ({cap} bytes) cannot hold a {need}-byte block")
            if guard is not None and k >= guard:
                return None
            heapq.heappop(heap)
            sz = size[v]
            if slow_cap and slow_used + sz > slow_cap:
                raise UserError(f"slow tier ({slow_cap} bytes) is full: raise --slow-bytes")
            loc[v] = codes.LOC_SLOW
            used -= sz
            slow_used += sz
            res.spills += 1
            res.spill_bytes += sz
            prefetched[v] = 0
            if sync:
                cost += slow.write_us(sz)
            if record:
                op(OP_SPILL_SYNC, v, CHARGED) if sync else op(OP_SPILL_BG, v)
            if predictive:
                heapq.heappush(spilled, (policy.predicted(v, cur_step), pid, v))
        return cost

    def push(b: int, seq: int) -> None:
        nonlocal push_id
        push_id += 1
        cur_seq[b] = push_id
        heapq.heappush(heap, (key(b, seq, cur_step, cls[b]), push_id, b))

    def prefetch(b: int, seq: int) -> None:
        nonlocal used, slow_used
        k = key(b, seq, cur_step, cls[b])
        if evict_for(size[b], False, k) is None:
            return
        loc[b] = codes.LOC_FAST
        used += size[b]
        slow_used -= size[b]
        prefetched[b] = 1
        res.prefetches += 1
        if record:
            op(OP_PREFETCH, b)
        push(b, seq)

    def predictive_prefetches(seq: int) -> None:
        horizon = cur_step + policy.horizon
        while spilled and spilled[0][0] <= horizon:
            p, pid, b = heapq.heappop(spilled)
            if loc[b] == codes.LOC_SLOW and cur_seq[b] == pid and p >= cur_step:
                prefetch(b, seq)

    for i in range(len(kinds)):
        s = steps[i]
        if s != cur_step:
            if step_dc:
                lat.append(step_cost)
            step_cost, step_dc, cur_step = 0.0, False, s
            if predictive:
                predictive_prefetches(i)
        k = kinds[i]
        b = blocks[i]
        if k == codes.ACCESS:
            sz = size[b]
            on_access(b, s)
            res.accesses += 1
            if loc[b] == codes.LOC_FAST:
                cost = fast.read_us(sz)
                miss = False
                if prefetched[b]:
                    res.prefetch_used += 1
                    prefetched[b] = 0
                if record:
                    op(OP_HIT, b, DC_ACCESS if crits[i] else 0)
            else:
                miss = True
                res.misses += 1
                if loc[b] == codes.LOC_SLOW:
                    slow_used -= sz
                cost = slow.read_us(sz) + evict_for(sz, True, None)
                loc[b] = codes.LOC_FAST
                used += sz
                if record:
                    op(OP_MISS, b, DC_ACCESS if crits[i] else 0)
            if crits[i]:
                step_dc = True
                step_cost += cost
                res.dc_accesses += 1
                res.dc_misses += miss
                if hi[b]:
                    res.hi_accesses += 1
                    res.hi_misses += miss
                if cls[b] == codes.PREFETCH_SOON:
                    cls[b] = codes.DECODE_CRITICAL
            push(b, i)
        elif k == codes.HINT:
            c = hints[i]
            cls[b] = c
            if loc[b] == codes.LOC_FAST:
                if uses_hints:
                    push(b, i)
            elif loc[b] == codes.LOC_SLOW and prefetch_on_hint and c == codes.PREFETCH_SOON:
                prefetch(b, i)
        elif k == codes.ALLOC:
            cls[b] = hints[i]
            if loc[b] != codes.LOC_FAST:
                if loc[b] == codes.LOC_SLOW:
                    slow_used -= size[b]
                step_cost += evict_for(size[b], True, None)
                loc[b] = codes.LOC_FAST
                used += size[b]
            if record:
                op(OP_ALLOC, b)
            push(b, i)
        else:  # FREE
            if loc[b] == codes.LOC_FAST:
                used -= size[b]
            elif loc[b] == codes.LOC_SLOW:
                slow_used -= size[b]
            if loc[b] != codes.LOC_NONE and record:
                op(OP_FREE, b)
            loc[b] = codes.LOC_NONE
            cur_seq[b] = -1
            prefetched[b] = 0
    if step_dc:
        lat.append(step_cost)
    res.step_latency_us = np.asarray(lat, dtype=np.float64)
    if record:
        res.ops = {"step": np.asarray(ops_step, dtype=np.int64), "op": np.asarray(ops_op, dtype=np.uint8),
                   "block": np.asarray(ops_block, dtype=np.int32),
                   "charge": np.asarray(ops_charge, dtype=np.uint8)}
    return res
