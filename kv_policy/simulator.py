"""Two-tier KV placement simulator: runs one policy over one trace and prices every move.

Cost model (README.md "Simulator"):
* A decode step reads its decode-critical blocks one after another: a hit costs a fast-tier read, a miss
  a slow-tier read (or, for a block the policy dropped, its recompute) plus the spill writes needed to
  make room. Allocations that force spills pay them on the same step. The step's latency is its compute
  time (`TierModel.step_us`) plus this KV stall.
* The slow tier is one FIFO device with a clock that runs across steps. Simulated time advances by each
  step's latency (compute per elapsed step + KV stall); a step's reads come first, then its compute.
  Demand device work (miss reads, synchronous spills, prefill re-read misses) starts when the device has
  finished everything queued before it, and the wait is part of that step's latency. Background I/O
  (prefetch reads, the spills they cause, background spills) is admitted only when the queue it joins
  drains within `io_budget_us` (the step's compute time) of its issue; what is admitted but not finished
  when the step ends (a spill larger than the estimate, a cleaner's last write) carries into the next
  step's queue, so a demand read queued behind it waits there: background I/O is never free of time.
* A policy with a free target (`Policy.free_target`, a fraction of the fast tier) spills its lowest-valued
  blocks in the background at the end of each step while the step's I/O budget lasts, so later allocations
  and misses find room without a synchronous write (a kswapd-like watermark).
* A block whose intent class is recompute-ok may be dropped instead of spilled when the policy chooses
  (no write; its next access recomputes it at `recompute_us`).
* Clean copies: a KV block is immutable once its request has allocated a later block (tokens are appended
  to the request's last block only), so a block spilled while complete keeps a valid copy on the slow tier
  after it is read back. Evicting it again writes nothing (op `evict-clean`: no I/O, no budget); the copy
  is released when the request frees the block (or, with a bounded slow tier, when a spill needs its room).
  A block spilled while it was its request's last block keeps no copy once read back.
* Look-ahead prefetch: a policy with `prefetch_lookahead` nominates, at the end of each step, spilled blocks
  of the announced next batch (`Policy.lookahead`); each is read in the background while the step's I/O
  budget lasts and a lower-valued victim exists (the same rule as a hinted prefetch).
* SLO: every request with a decode-critical access in a step is a request-step; it meets its deadline when
  the step's latency is at most the request's TPOT deadline.
"""
from __future__ import annotations

import heapq
import math
from itertools import chain
from dataclasses import dataclass, field

import numpy as np

from harness.errors import UserError
from kv_policy import codes, simulator_enu, simulator_fast
from kv_policy.policies import Policy
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace

HIGH_PRIORITY = 70  # priority bands: high >= 70, mid 40-69, low < 40
MID_PRIORITY = 40
BANDS = ("high", "mid", "low")

# Operation codes recorded for replay.
OP_HIT, OP_MISS, OP_ALLOC, OP_SPILL_SYNC, OP_SPILL_BG, OP_PREFETCH, OP_FREE, OP_DROP, OP_RECOMPUTE, \
    OP_EVICT_CLEAN = range(10)
EVENT_CHUNK = 1 << 20  # events converted to Python values at a time
OP_NAMES = ("hit", "miss", "alloc", "spill-sync", "spill-bg", "prefetch", "free", "drop", "recompute",
            "evict-clean")
# Op charge flags: background work, on the step's critical path, or a decode-critical access.
BACKGROUND, CHARGED, DC_ACCESS = 0, 1, 2
LOC_DROPPED = 3  # evicted without a copy: the next access recomputes it
COMPACT_MIN, COMPACT_FACTOR = 4096, 4  # the heap is rebuilt from its live entries past max(MIN, FACTOR x live)
# Read on every event: bound once (a global is one lookup, `codes.X` two).
_ACCESS, _HINT, _ALLOC = codes.ACCESS, codes.HINT, codes.ALLOC
_LOC_FAST, _LOC_SLOW, _LOC_NONE = codes.LOC_FAST, codes.LOC_SLOW, codes.LOC_NONE
_RECOMPUTE_OK, _PREFETCH_SOON, _DECODE_CRITICAL, _WARM = (codes.RECOMPUTE_OK, codes.PREFETCH_SOON,
                                                          codes.DECODE_CRITICAL, codes.WARM)


def band_of(priority: np.ndarray) -> np.ndarray:
    """0 high, 1 mid, 2 low."""
    return np.where(priority >= HIGH_PRIORITY, 0, np.where(priority >= MID_PRIORITY, 1, 2)).astype(np.int64)


def _ratio(num: int, den: int) -> float | None:
    """A ratio, or None when there is nothing to divide by (no data is not 0.0)."""
    return num / den if den else None


@dataclass
class SimResult:
    """Counts, per-step latencies and per-request-step SLO outcomes of one (trace, policy) run."""

    policy: str
    dc_accesses: int = 0
    dc_misses: int = 0
    band_accesses: list[int] = field(default_factory=lambda: [0, 0, 0])
    band_misses: list[int] = field(default_factory=lambda: [0, 0, 0])
    accesses: int = 0
    misses: int = 0
    spills: int = 0
    spill_bytes: int = 0
    clean_evictions: int = 0
    drops: int = 0
    recomputes: int = 0
    prefetches: int = 0
    prefetch_used: int = 0
    prefetch_dropped: int = 0
    background_wait_us: float = 0.0
    step_latency_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rs_step: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))    # request-step -> step index
    rs_deadline_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rs_band: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ops: dict[str, np.ndarray] | None = None

    @property
    def hi_accesses(self) -> int:
        return self.band_accesses[0]

    @property
    def hi_misses(self) -> int:
        return self.band_misses[0]

    @property
    def dc_miss_ratio(self) -> float | None:
        """Decode-critical misses per decode-critical access (None without accesses)."""
        return _ratio(self.dc_misses, self.dc_accesses)

    @property
    def hi_miss_ratio(self) -> float | None:
        return _ratio(self.band_misses[0], self.band_accesses[0])

    def band_miss_ratio(self, band: int) -> float | None:
        return _ratio(self.band_misses[band], self.band_accesses[band])

    def slo_met(self) -> np.ndarray:
        """Per request-step: did the step finish within the request's TPOT deadline?"""
        if not self.rs_step.size:
            return np.zeros(0, dtype=bool)
        return self.step_latency_us[self.rs_step] <= self.rs_deadline_us


def _events(trace: Trace):
    """(index, step, kind, block, critical, class) per event, converted to Python values a chunk at a time: a whole
    serving trace's columns as lists at once would hold ~6 GB; zip over chunks is also faster than indexing."""
    n = len(trace)
    return chain.from_iterable(
        zip(range(c0, min(n, c0 + EVENT_CHUNK)), trace.step[c0:c0 + EVENT_CHUNK].tolist(),
            trace.kind[c0:c0 + EVENT_CHUNK].tolist(), trace.block[c0:c0 + EVENT_CHUNK].tolist(),
            trace.critical[c0:c0 + EVENT_CHUNK].tolist(), trace.cls[c0:c0 + EVENT_CHUNK].tolist())
        for c0 in range(0, n, EVENT_CHUNK))


def _compiled_loop(policy: Policy, trace: Trace):
    """The compiled loop's `simulate_into` that runs `policy` on `trace` (simulator_fast.py's for a policy whose keys
    are fixed by the event alone, simulator_enu.py's for ExpectedNextUse and DeadlineAware), or None."""
    if simulator_fast.eligible(policy):
        return simulator_fast.simulate_into
    if simulator_enu.eligible(policy, trace):
        return simulator_enu.simulate_into
    return None


def compiled(policy: Policy, trace: Trace) -> bool:
    """Does `simulate` run `policy` on `trace` in a compiled loop (simulator_fast.py or simulator_enu.py)?"""
    return _compiled_loop(policy, trace) is not None


def simulate(trace: Trace, policy: Policy, tiers: TierModel, record: bool = False, fast: bool = True) -> SimResult:
    """Run `policy` over `trace`; with `record`, also return the operation log replay executes. A policy whose keys
    are fixed by the event alone runs in the compiled loop (simulator_fast.py), ExpectedNextUse and DeadlineAware in
    theirs (simulator_enu.py), unless `fast` is False; each makes this loop's decisions."""
    loop = _compiled_loop(policy, trace) if fast else None
    if loop is not None:
        res = SimResult(policy.name)
        loop(res, trace, policy, tiers, band_of(trace.block_priority), record)
        return res
    policy.bind(trace)
    res = SimResult(policy.name)
    size = trace.block_size.tolist()
    band = band_of(trace.block_priority).tolist()
    req = trace.block_request.tolist()
    deadline = trace.block_deadline_us.tolist()
    nb = trace.n_blocks
    loc = bytearray(nb)
    cls = bytearray([_WARM]) * nb
    prefetched = bytearray(nb)
    copy = bytearray(nb)         # 1 = the slow tier holds a copy that stays valid after a read-back
    kept: list[int] = []         # fast-resident blocks holding such a copy (released first when the slow tier fills)
    tail: dict[int, int] = {}    # request -> its last allocated block (the one tokens are appended to)
    boosted: list[int] = []      # blocks prefetched by look-ahead this step (re-keyed after the next step)
    ready_at = [0.0] * nb        # simulated time (us) at which a block's prefetch read completes
    cur_seq = [-1] * nb          # push id of a block's live heap entry
    heap: list[tuple[float, int, int]] = []
    compact_at = COMPACT_MIN     # heap size at which superseded entries are dropped (an entry never revives)
    heappush = heapq.heappush
    spilled: list[tuple[float, int, int]] = []  # PredictiveHotness: (predicted step, push id, block)
    fast, slow = tiers.fast, tiers.slow
    cap, slow_cap = tiers.fast_capacity, tiers.slow_capacity
    budget, step_us = tiers.io_budget_us, tiers.step_us
    can_recompute = math.isfinite(tiers.recompute_us_per_byte)
    used = slow_used = 0
    push_id = 0
    key = policy.key
    on_access = None if type(policy).on_access is Policy.on_access else policy.on_access  # (a no-op: not called)
    fast_read_lat, fast_read_div = fast.read_latency_us, fast.read_gbps * 1e3  # fast.read_us inlined, same floats
    on_event = policy.on_event if policy.observes_events else None
    choose_recompute = policy.choose_recompute
    uses_hints, prefetch_on_hint = policy.uses_hints, policy.prefetch_on_hint
    predictive = policy.predictive_prefetch
    lookahead = policy.lookahead if policy.prefetch_lookahead else None
    on_evicted = policy.on_evicted if policy.prefetch_lookahead else None
    stale = policy.stale if policy.step_keys else None
    raise_key = policy.raise_key if policy.raises_keys else None
    i = 0
    ops_step: list[int] = []
    ops_op: list[int] = []
    ops_block: list[int] = []
    ops_charge: list[int] = []
    lat: list[float] = []
    rs_step: list[int] = []
    rs_deadline: list[float] = []
    rs_band: list[int] = []
    step_reqs: dict[int, int] = {}   # request -> a block of it (for its deadline and band)
    step_cost = 0.0                  # this step's KV stall so far
    t0 = 0.0                         # simulated time (us) at which the current step started
    dev = 0.0                        # simulated time at which the slow tier has finished all queued I/O
    cur_step = int(trace.step[0]) if len(trace) else 0

    def op(code: int, b: int, charge: int = 0) -> None:
        ops_step.append(cur_step)
        ops_op.append(code)
        ops_block.append(b)
        ops_charge.append(charge)

    def end_step() -> None:
        if step_reqs:
            k = len(lat)
            lat.append(step_us + step_cost)
            for r, b in step_reqs.items():
                rs_step.append(k)
                rs_deadline.append(deadline[b])
                rs_band.append(band[b])
            step_reqs.clear()

    def evict_for(need: int, sync: bool, guard: float | None) -> float | None:
        """Spill (or drop) victims until `need` bytes fit; None if a prefetch would evict a better block."""
        nonlocal used, slow_used
        cost = 0.0
        while used + need > cap:
            while heap:
                k, pid, v = heap[0]
                if loc[v] == _LOC_FAST and cur_seq[v] == pid:
                    if raise_key is not None and raise_key(v):
                        push(v, i)  # worth more now than when it was filed: re-filed, the old entry goes stale
                        continue
                    break
                heapq.heappop(heap)
            if not heap:
                raise UserError(f"fast tier ({cap} bytes) cannot hold a {need}-byte block")
            if guard is not None and k >= guard:
                return None
            heapq.heappop(heap)
            sz = size[v]
            used -= sz
            prefetched[v] = 0
            if copy[v]:  # its slow-tier copy is still valid: nothing to write
                loc[v] = _LOC_SLOW
                res.clean_evictions += 1
                if record:
                    op(OP_EVICT_CLEAN, v)
                if on_evicted is not None:
                    on_evicted(v)
                if predictive:
                    heapq.heappush(spilled, (policy.predicted(v, cur_step), pid, v))
                continue
            if can_recompute and cls[v] == _RECOMPUTE_OK and \
                    choose_recompute(v, slow.read_us(sz), slow.write_us(sz), tiers.recompute_us(sz)):
                loc[v] = LOC_DROPPED
                res.drops += 1
                if record:
                    op(OP_DROP, v)
                continue
            while slow_cap and slow_used + sz > slow_cap and kept:
                x = kept.pop()  # release a read-back block's copy (it is resident: no data is lost)
                if copy[x] and loc[x] == _LOC_FAST:
                    copy[x] = 0
                    slow_used -= size[x]
            if slow_cap and slow_used + sz > slow_cap:
                raise UserError(f"slow tier ({slow_cap} bytes) is full: raise --slow-bytes")
            loc[v] = _LOC_SLOW
            slow_used += sz
            res.spills += 1
            res.spill_bytes += sz
            cost += slow.write_us(sz)
            copy[v] = tail.get(req[v], -1) != v  # complete blocks are immutable: the copy stays valid
            if record:
                op(OP_SPILL_SYNC, v, CHARGED) if sync else op(OP_SPILL_BG, v)
            if on_evicted is not None:
                on_evicted(v)
            if predictive:
                heapq.heappush(spilled, (policy.predicted(v, cur_step), pid, v))
        return cost

    def push(b: int, seq: int) -> None:
        nonlocal push_id
        push_id += 1
        cur_seq[b] = push_id
        heappush(heap, (key(b, seq, cur_step, cls[b]), push_id, b))
        if len(heap) > compact_at:
            compact()

    def compact() -> None:
        """Drop superseded entries: (key, push id) is a total order and an entry never revives, so the min stays."""
        nonlocal compact_at
        heap[:] = [e for e in heap if loc[e[2]] == _LOC_FAST and cur_seq[e[2]] == e[1]]
        heapq.heapify(heap)
        compact_at = max(COMPACT_MIN, COMPACT_FACTOR * len(heap))

    def peek() -> int:
        """The next victim (-1 when no block is resident), after dropping stale heap entries."""
        while heap:
            _, pid, v = heap[0]
            if loc[v] == _LOC_FAST and cur_seq[v] == pid:
                if raise_key is not None and raise_key(v):
                    push(v, i)
                    continue
                return v
            heapq.heappop(heap)
        return -1

    def writes_nothing(v: int) -> bool:
        """Would evicting `v` write nothing (a clean copy, or a drop the policy chooses)?"""
        return bool(copy[v]) or (can_recompute and cls[v] == _RECOMPUTE_OK and
                                 choose_recompute(v, slow.read_us(size[v]), slow.write_us(size[v]),
                                                  tiers.recompute_us(size[v])))

    def free_victim(sz: int) -> bool:
        """Does the next victim alone make room for `sz` bytes without a write (a clean copy or a drop)?"""
        v = peek()
        if v < 0 or used - size[v] + sz > cap:
            return False
        return writes_nothing(v)

    def bg_start(need: float) -> float | None:
        """When background work of `need` us issued now would start, or None if the queue it joins would not
        drain within the I/O budget (the compute time it may hide behind)."""
        now = t0 + step_cost
        start = dev if dev > now else now
        return None if start + need > now + budget else start

    def demand_wait() -> float:
        """How long demand I/O issued now waits for the device (FIFO behind everything queued before it)."""
        w = dev - (t0 + step_cost)
        if w > 0.0:
            res.background_wait_us += w
            return w
        return 0.0

    def prefetch(b: int, seq: int) -> None:
        """Background read of a spilled block, if the step's I/O budget holds it and a worse victim exists."""
        nonlocal used, dev
        sz = size[b]
        need = slow.read_us(sz) + (slow.write_us(sz) if used + sz > cap and not free_victim(sz) else 0.0)
        start = bg_start(need)
        if start is None:
            res.prefetch_dropped += 1
            return
        k = key(b, seq, cur_step, cls[b])
        spill_cost = evict_for(sz, False, k)
        if spill_cost is None:
            return
        dev = start + slow.read_us(sz) + spill_cost  # an estimate exceeded (several victims) carries over
        loc[b] = _LOC_FAST
        used += sz
        readback(b, sz)
        prefetched[b] = 1
        ready_at[b] = dev
        res.prefetches += 1
        if record:
            op(OP_PREFETCH, b)
        push(b, seq)

    def readback(b: int, sz: int) -> None:
        """A spilled block is back in the fast tier: keep its copy if it stays valid, else free its room."""
        nonlocal slow_used
        if copy[b]:
            if slow_cap:  # only a bounded slow tier ever needs the room back
                kept.append(b)
        else:
            slow_used -= sz

    def lookahead_prefetches(seq: int) -> None:
        """The policy's nominated spilled blocks of the next batch, best first, while budget and victims last."""
        for b in lookahead(cur_step, loc):
            if loc[b] != _LOC_SLOW:
                continue
            before = res.prefetches
            prefetch(b, seq)
            if res.prefetches == before:
                break
            boosted.append(b)

    def predictive_prefetches(seq: int) -> None:
        horizon = cur_step + policy.horizon
        while spilled and spilled[0][0] <= horizon:
            p, pid, b = heapq.heappop(spilled)
            if loc[b] == _LOC_SLOW and cur_seq[b] == pid and p >= cur_step:
                prefetch(b, seq)

    def clean() -> None:
        """Background spill toward the policy's free target while each write still fits the I/O budget."""
        nonlocal dev
        target = int(policy.free_target * cap)
        while cap - used < target:
            v = peek()
            if v < 0:
                break
            start = bg_start(0.0 if writes_nothing(v) else slow.write_us(size[v]))
            if start is None:
                break
            cost = evict_for(cap - used + 1, False, None)
            if cost:
                dev = start + cost

    n_acc = n_dc = n_dcm = 0  # the busiest counters as locals (written to res at the end)
    band_acc, band_miss = res.band_accesses, res.band_misses
    cleaner = policy.free_target > 0 and math.isfinite(budget) and budget > 0
    for i, s, k, b, crit, hint in _events(trace):
        if s != cur_step:
            end_step()
            if stale is not None:  # one-step keys lapse before the end-of-step look-ahead and cleaner
                for x in stale():
                    if loc[x] == _LOC_FAST:
                        push(x, i)
            expired, boosted[:] = boosted[:], []
            if budget > 0:  # issued as the step's compute starts: the window they may hide behind
                if lookahead is not None:
                    lookahead_prefetches(i)
                if cleaner:
                    clean()
            t0 += step_us * (s - cur_step) + step_cost  # the device clock runs on: unfinished I/O carries over
            step_cost, cur_step = 0.0, s
            if lookahead is not None:
                for x in expired:  # a look-ahead's keep-value lasts one step: re-key what was not read
                    if prefetched[x] and loc[x] == _LOC_FAST:
                        push(x, i)
            if predictive:
                predictive_prefetches(i)
        if on_event is not None:
            on_event(i, k, b, s, crit, hint)
        if k == _ACCESS:
            sz = size[b]
            if on_access is not None:
                on_access(b, s)
            n_acc += 1
            if loc[b] == _LOC_FAST:
                cost = fast_read_lat + sz / fast_read_div
                miss = False
                if prefetched[b]:
                    res.prefetch_used += 1
                    prefetched[b] = 0
                    wait = ready_at[b] - (t0 + step_cost)
                    if crit and wait > 0.0:  # its prefetch is still in flight: wait for it
                        cost += wait
                        res.background_wait_us += wait
                if record:
                    op(OP_HIT, b, DC_ACCESS if crit else 0)
            else:
                miss = True
                res.misses += 1
                dropped = loc[b] == LOC_DROPPED
                if dropped:
                    res.recomputes += 1
                elif loc[b] == _LOC_SLOW:
                    loc[b] = _LOC_FAST  # read: its kept copy may be released to make room below
                    readback(b, sz)
                spill = evict_for(sz, True, None)
                io = spill if dropped else slow.read_us(sz) + spill  # device time (recompute uses none)
                wait = demand_wait() if io > 0.0 else 0.0
                if io > 0.0:
                    dev = t0 + step_cost + wait + io
                cost = wait + io + (tiers.recompute_us(sz) if dropped else 0.0)
                if record:  # after the spills that made room: the block's slot is free by then
                    op(OP_RECOMPUTE if dropped else OP_MISS, b, DC_ACCESS if crit else CHARGED)
                loc[b] = _LOC_FAST
                used += sz
                if not crit:  # a prefill re-read that misses stalls the step too (not a decode-critical read)
                    step_cost += cost
            if crit:
                step_cost += cost
                n_dc += 1
                bd = band[b]
                band_acc[bd] += 1
                if miss:
                    n_dcm += 1
                    band_miss[bd] += 1
                step_reqs[req[b]] = b
                if cls[b] == _PREFETCH_SOON:
                    cls[b] = _DECODE_CRITICAL
            push_id += 1  # push(b, i), inlined on the busiest path
            cur_seq[b] = push_id
            heappush(heap, (key(b, i, cur_step, cls[b]), push_id, b))
            if len(heap) > compact_at:
                compact()
        elif k == _HINT:
            c = hint
            cls[b] = c
            if loc[b] == _LOC_FAST:
                if uses_hints:
                    push(b, i)
            elif loc[b] == _LOC_SLOW and prefetch_on_hint and c == _PREFETCH_SOON:
                prefetch(b, i)
        elif k == _ALLOC:
            cls[b] = hint
            tail[req[b]] = b
            if copy[b]:  # produced again: the old copy is stale
                copy[b] = 0
                if loc[b] == _LOC_FAST:
                    slow_used -= size[b]
            if loc[b] != _LOC_FAST:
                if loc[b] == _LOC_SLOW:
                    slow_used -= size[b]
                spill = evict_for(size[b], True, None)
                if spill > 0.0:  # synchronous writes queue on the device like a demand read
                    spill += demand_wait()
                    step_cost += spill
                    dev = t0 + step_cost
                loc[b] = _LOC_FAST
                used += size[b]
            if record:
                op(OP_ALLOC, b)
            push(b, i)
        else:  # FREE
            if loc[b] == _LOC_FAST:
                used -= size[b]
                if copy[b]:
                    slow_used -= size[b]
            elif loc[b] == _LOC_SLOW:
                slow_used -= size[b]
            copy[b] = 0
            if loc[b] != _LOC_NONE and record:
                op(OP_FREE, b)
            loc[b] = _LOC_NONE
            cur_seq[b] = -1
            prefetched[b] = 0
    end_step()
    res.accesses, res.dc_accesses, res.dc_misses = n_acc, n_dc, n_dcm
    res.step_latency_us = np.asarray(lat, dtype=np.float64)
    res.rs_step = np.asarray(rs_step, dtype=np.int64)
    res.rs_deadline_us = np.asarray(rs_deadline, dtype=np.float64)
    res.rs_band = np.asarray(rs_band, dtype=np.int64)
    if record:
        res.ops = {"step": np.asarray(ops_step, dtype=np.int64), "op": np.asarray(ops_op, dtype=np.uint8),
                   "block": np.asarray(ops_block, dtype=np.int32),
                   "charge": np.asarray(ops_charge, dtype=np.uint8)}
    return res
