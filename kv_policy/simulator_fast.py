"""The simulator's compiled loop (numba) for policies whose key is fixed by the event alone.

A policy qualifies when it files each block under a key that depends only on the event that pushed it
(`Policy.event_keys`: LRU's event index, MIN's and PrioMIN's next use, the engine rows' release order and
priorities; a key may have two parts) and uses none of the simulator's other hooks (prefetch, look-ahead,
background spills, recompute choices, per-step or raised keys; a hint re-files a resident block under the hint's
key when the policy uses hints, and an event observer may only feed the keys).
For those the simulator's work is bookkeeping and a heap, which this module runs as one compiled function over the
trace's columns: the same steps in the same order as `simulator.simulate` (each statement below mirrors one
there), the same min-heap order ((key, push id) is a total order, so any correct heap pops the same victims),
the same floating-point expressions in the same order, so the counts, per-step latencies and the recorded
operation log are identical (tests/policy/test_policy_speed_fast_path.py checks them against the reference loop).
Every other policy keeps the Python loop and its interface.
"""
from __future__ import annotations

import numpy as np
from kv_policy.jit import njit

from harness.errors import UserError
from kv_policy import codes
from kv_policy.policies import Policy
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace

# Integer state slots (one int64 array, so the helpers can update them in place).
USED, SLOW_USED, PUSH_ID, HEAP_N, KEPT_N, NOPS, ERR, ERR_ARG, CLEAN, SPILLS, SPILL_BYTES = range(11)
N_STATE = 11
ERR_FAST_FULL, ERR_SLOW_FULL = 1, 2
FAST_LOC, SLOW_LOC, NONE_LOC = codes.LOC_FAST, codes.LOC_SLOW, codes.LOC_NONE
ACCESS, HINT, ALLOC = codes.ACCESS, codes.HINT, codes.ALLOC
OP_HIT, OP_MISS, OP_ALLOC, OP_SPILL_SYNC, OP_SPILL_BG, OP_FREE, OP_EVICT_CLEAN = 0, 1, 2, 3, 4, 6, 9
CHARGED, DC_ACCESS = 1, 2
START_CAP = 1 << 16  # first size of the heap and of the per-step columns; they grow (and the heap sheds stale entries)


def eligible(policy: Policy) -> bool:
    """Does `policy` use nothing but an event-fixed key (so the compiled loop makes its decisions)?"""
    cls = type(policy)
    return (cls.on_access is Policy.on_access and cls.choose_recompute is Policy.choose_recompute
            and cls.event_keys is not Policy.event_keys
            and not (policy.prefetch_on_hint or policy.predictive_prefetch or policy.free_target > 0
                     or policy.prefetch_lookahead or policy.step_keys or policy.raises_keys))


@njit
def _before(k1, k2, p, m1, m2, q):
    """(k1, k2, p) < (m1, m2, q): the heap's order, a key's two parts then the push id."""
    return k1 < m1 or (k1 == m1 and (k2 < m2 or (k2 == m2 and p < q)))


@njit
def _heap_push(hk, hk2, hp, hb, n, key, key2, pid, b):
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if _before(hk[parent], hk2[parent], hp[parent], key, key2, pid):
            break
        hk[i], hk2[i], hp[i], hb[i] = hk[parent], hk2[parent], hp[parent], hb[parent]
        i = parent
    hk[i], hk2[i], hp[i], hb[i] = key, key2, pid, b
    return n + 1


@njit
def _heap_pop(hk, hk2, hp, hb, n):
    n -= 1
    if n > 0:
        hk[0], hk2[0], hp[0], hb[0] = hk[n], hk2[n], hp[n], hb[n]
        _sift_down(hk, hk2, hp, hb, n, 0)
    return n


@njit
def _grown_f(a, need):
    """`a` copied into an array of at least `need` (twice its size): the columns grow with what is filed."""
    out = np.zeros(max(need, 2 * a.shape[0]), dtype=np.float64)
    out[:a.shape[0]] = a
    return out


@njit
def _grown_i(a, need):
    out = np.zeros(max(need, 2 * a.shape[0]), dtype=np.int64)
    out[:a.shape[0]] = a
    return out


@njit
def _sift_down(hk, hk2, hp, hb, n, i):
    key, key2, pid, b = hk[i], hk2[i], hp[i], hb[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _before(hk[c + 1], hk2[c + 1], hp[c + 1], hk[c], hk2[c], hp[c]):
            c += 1
        if _before(hk[c], hk2[c], hp[c], key, key2, pid):
            hk[i], hk2[i], hp[i], hb[i] = hk[c], hk2[c], hp[c], hb[c]
            i = c
        else:
            break
    hk[i], hk2[i], hp[i], hb[i] = key, key2, pid, b


@njit
def _compacted(hk, hk2, hp, hb, st, loc, cur_seq):
    """A full heap without its superseded entries (simulator.compact: (key, push id) is a total order and an entry
    never revives, so every later pop is the same), in arrays twice as large when it is still over half full. Keeps
    the heap at a few times the resident blocks instead of one entry per push (a whole serving trace: ~70M)."""
    n = 0
    for j in range(st[HEAP_N]):
        v = hb[j]
        if loc[v] == FAST_LOC and cur_seq[v] == hp[j]:
            hk[n], hk2[n], hp[n], hb[n] = hk[j], hk2[j], hp[j], hb[j]
            n += 1
    for j in range(n // 2 - 1, -1, -1):
        _sift_down(hk, hk2, hp, hb, n, j)
    st[HEAP_N] = n
    if 2 * n < hk.shape[0]:
        return hk, hk2, hp, hb
    size = 2 * hk.shape[0]
    return _grown_f(hk, size), _grown_f(hk2, size), _grown_i(hp, size), _grown_i(hb, size)


@njit
def _op(ops_step, ops_op, ops_block, ops_charge, st, step, code, b, charge):
    k = st[NOPS]
    ops_step[k] = step
    ops_op[k] = code
    ops_block[k] = b
    ops_charge[k] = charge
    st[NOPS] = k + 1


@njit
def _evict_for(need, sync, st, cap, slow_cap, hk, hk2, hp, hb, loc, cur_seq, size, copy, kept, tail, reqi,
               slow_wl, slow_wg, record, cur_step, ops_step, ops_op, ops_block, ops_charge):
    """simulator.evict_for with guard None, no raise_key, no recompute drops, no on_evicted."""
    cost = 0.0
    while st[USED] + need > cap:
        v = -1
        while st[HEAP_N] > 0:
            v = hb[0]
            if loc[v] == FAST_LOC and cur_seq[v] == hp[0]:
                break
            st[HEAP_N] = _heap_pop(hk, hk2, hp, hb, st[HEAP_N])
            v = -1
        if st[HEAP_N] == 0:
            st[ERR], st[ERR_ARG] = ERR_FAST_FULL, need
            return cost
        st[HEAP_N] = _heap_pop(hk, hk2, hp, hb, st[HEAP_N])
        sz = size[v]
        st[USED] -= sz
        if copy[v]:
            loc[v] = SLOW_LOC
            st[CLEAN] += 1
            if record:
                _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_EVICT_CLEAN, v, 0)
            continue
        while slow_cap and st[SLOW_USED] + sz > slow_cap and st[KEPT_N] > 0:
            st[KEPT_N] -= 1
            x = kept[st[KEPT_N]]
            if copy[x] and loc[x] == FAST_LOC:
                copy[x] = 0
                st[SLOW_USED] -= size[x]
        if slow_cap and st[SLOW_USED] + sz > slow_cap:
            st[ERR] = ERR_SLOW_FULL
            return cost
        loc[v] = SLOW_LOC
        st[SLOW_USED] += sz
        st[SPILLS] += 1
        st[SPILL_BYTES] += sz
        cost += slow_wl + sz / (slow_wg * 1e3)
        copy[v] = 1 if tail[reqi[v]] != v else 0
        if record:
            if sync:
                _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_SPILL_SYNC, v, CHARGED)
            else:
                _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_SPILL_BG, v, 0)
    return cost


@njit
def _step_room(lat, rs_step, rs_deadline, rs_band, n_lat, n_rs):
    """The step columns with room for one more step and `n_rs` request-steps (grown when full)."""
    if n_lat == lat.shape[0]:
        lat = _grown_f(lat, n_lat + 1)
    if n_rs > rs_step.shape[0]:
        rs_step, rs_deadline, rs_band = _grown_i(rs_step, n_rs), _grown_f(rs_deadline, n_rs), _grown_i(rs_band, n_rs)
    return lat, rs_step, rs_deadline, rs_band


@njit
def _end_step(lat, n_lat, latency, req_order, req_block, n_step_reqs, rs_step, rs_deadline, rs_band, n_rs,
              deadline, band):
    """simulator.end_step: the step's latency, and one SLO record per request with a decode-critical access."""
    lat[n_lat] = latency
    for j in range(n_step_reqs):
        bb = req_block[req_order[j]]
        rs_step[n_rs] = n_lat
        rs_deadline[n_rs] = deadline[bb]
        rs_band[n_rs] = band[bb]
        n_rs += 1
    return n_lat + 1, n_rs


@njit
def _run(steps, kinds, blocks, crits, keys, keys2, hint_push, size, band, reqi, n_req, deadline, cap, slow_cap,
         fast_rl, fast_rg, slow_rl, slow_rg, slow_wl, slow_wg, step_us, record, start_cap):
    n = steps.shape[0]
    nb = size.shape[0]
    st = np.zeros(N_STATE, dtype=np.int64)
    loc = np.zeros(nb, dtype=np.uint8)
    copy = np.zeros(nb, dtype=np.uint8)
    cur_seq = np.full(nb, -1, dtype=np.int64)
    tail = np.full(n_req, -1, dtype=np.int64)
    kept = np.zeros(start_cap, dtype=np.int64)
    hk = np.zeros(start_cap, dtype=np.float64)
    hk2 = np.zeros(start_cap, dtype=np.float64)
    hp = np.zeros(start_cap, dtype=np.int64)
    hb = np.zeros(start_cap, dtype=np.int64)
    n_ops = 2 * n + 1 if record else 1
    ops_step = np.zeros(n_ops, dtype=np.int64)
    ops_op = np.zeros(n_ops, dtype=np.uint8)
    ops_block = np.zeros(n_ops, dtype=np.int32)
    ops_charge = np.zeros(n_ops, dtype=np.uint8)
    lat = np.zeros(start_cap, dtype=np.float64)
    rs_step = np.zeros(start_cap, dtype=np.int64)
    rs_deadline = np.zeros(start_cap, dtype=np.float64)
    rs_band = np.zeros(start_cap, dtype=np.int64)
    req_order = np.zeros(n_req, dtype=np.int64)   # requests with a decode-critical access this step, first-seen
    req_block = np.zeros(n_req, dtype=np.int64)   # ... and the last such block of each
    req_mark = np.full(n_req, -1, dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)          # accesses, misses, dc_accesses, dc_misses
    band_acc = np.zeros(3, dtype=np.int64)
    band_miss = np.zeros(3, dtype=np.int64)
    n_lat = 0
    n_rs = 0
    n_step_reqs = 0
    step_mark = 0
    bg_wait = 0.0
    step_cost = 0.0
    t0 = 0.0
    dev = 0.0
    cur_step = steps[0] if n > 0 else 0
    for i in range(n):
        s = steps[i]
        if s != cur_step:
            if n_step_reqs:
                lat, rs_step, rs_deadline, rs_band = _step_room(lat, rs_step, rs_deadline, rs_band, n_lat,
                                                                   n_rs + n_step_reqs)
                n_lat, n_rs = _end_step(lat, n_lat, step_us + step_cost, req_order, req_block, n_step_reqs,
                                        rs_step, rs_deadline, rs_band, n_rs, deadline, band)
                n_step_reqs = 0
                step_mark += 1
            t0 += step_us * (s - cur_step) + step_cost
            step_cost = 0.0
            cur_step = s
        k = kinds[i]
        b = blocks[i]
        if k == ACCESS:
            sz = size[b]
            crit = crits[i]
            counts[0] += 1
            cost = 0.0
            miss = False
            if loc[b] == FAST_LOC:
                cost = fast_rl + sz / (fast_rg * 1e3)
                if record:
                    _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_HIT, b, DC_ACCESS if crit else 0)
            else:
                miss = True
                counts[1] += 1
                if loc[b] == SLOW_LOC:
                    loc[b] = FAST_LOC
                    if copy[b]:
                        if slow_cap:
                            if st[KEPT_N] == kept.shape[0]:
                                kept = _grown_i(kept, st[KEPT_N] + 1)
                            kept[st[KEPT_N]] = b
                            st[KEPT_N] += 1
                    else:
                        st[SLOW_USED] -= sz
                spill = _evict_for(sz, True, st, cap, slow_cap, hk, hk2, hp, hb, loc, cur_seq, size, copy, kept, tail,
                                   reqi, slow_wl, slow_wg, record, cur_step, ops_step, ops_op, ops_block, ops_charge)
                if st[ERR]:
                    break
                io = (slow_rl + sz / (slow_rg * 1e3)) + spill
                wait = 0.0
                if io > 0.0:
                    w = dev - (t0 + step_cost)
                    if w > 0.0:
                        bg_wait += w
                        wait = w
                    dev = t0 + step_cost + wait + io
                cost = wait + io + 0.0
                if record:
                    _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_MISS, b,
                        DC_ACCESS if crit else CHARGED)
                loc[b] = FAST_LOC
                st[USED] += sz
                if not crit:
                    step_cost += cost
            if crit:
                step_cost += cost
                counts[2] += 1
                if miss:
                    counts[3] += 1
                bd = band[b]
                band_acc[bd] += 1
                if miss:
                    band_miss[bd] += 1
                r = reqi[b]
                if req_mark[r] != step_mark:
                    req_mark[r] = step_mark
                    req_order[n_step_reqs] = r
                    n_step_reqs += 1
                req_block[r] = b
            st[PUSH_ID] += 1
            cur_seq[b] = st[PUSH_ID]
            if st[HEAP_N] == hk.shape[0]:
                hk, hk2, hp, hb = _compacted(hk, hk2, hp, hb, st, loc, cur_seq)
            st[HEAP_N] = _heap_push(hk, hk2, hp, hb, st[HEAP_N], keys[i], keys2[i], st[PUSH_ID], b)
        elif k == HINT:
            if hint_push and loc[b] == FAST_LOC:   # uses_hints: a resident block is re-filed under the hint's key
                st[PUSH_ID] += 1
                cur_seq[b] = st[PUSH_ID]
                if st[HEAP_N] == hk.shape[0]:
                    hk, hk2, hp, hb = _compacted(hk, hk2, hp, hb, st, loc, cur_seq)
                st[HEAP_N] = _heap_push(hk, hk2, hp, hb, st[HEAP_N], keys[i], keys2[i], st[PUSH_ID], b)
        elif k == ALLOC:
            tail[reqi[b]] = b
            if copy[b]:
                copy[b] = 0
                if loc[b] == FAST_LOC:
                    st[SLOW_USED] -= size[b]
            if loc[b] != FAST_LOC:
                if loc[b] == SLOW_LOC:
                    st[SLOW_USED] -= size[b]
                spill = _evict_for(size[b], True, st, cap, slow_cap, hk, hk2, hp, hb, loc, cur_seq, size, copy, kept,
                                   tail, reqi, slow_wl, slow_wg, record, cur_step, ops_step, ops_op, ops_block,
                                   ops_charge)
                if st[ERR]:
                    break
                if spill > 0.0:
                    w = dev - (t0 + step_cost)
                    if w > 0.0:
                        bg_wait += w
                        spill += w
                    else:
                        spill += 0.0
                    step_cost += spill
                    dev = t0 + step_cost
                loc[b] = FAST_LOC
                st[USED] += size[b]
            if record:
                _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_ALLOC, b, 0)
            st[PUSH_ID] += 1
            cur_seq[b] = st[PUSH_ID]
            if st[HEAP_N] == hk.shape[0]:
                hk, hk2, hp, hb = _compacted(hk, hk2, hp, hb, st, loc, cur_seq)
            st[HEAP_N] = _heap_push(hk, hk2, hp, hb, st[HEAP_N], keys[i], keys2[i], st[PUSH_ID], b)
        else:
            if loc[b] == FAST_LOC:
                st[USED] -= size[b]
                if copy[b]:
                    st[SLOW_USED] -= size[b]
            elif loc[b] == SLOW_LOC:
                st[SLOW_USED] -= size[b]
            copy[b] = 0
            if loc[b] != NONE_LOC and record:
                _op(ops_step, ops_op, ops_block, ops_charge, st, cur_step, OP_FREE, b, 0)
            loc[b] = NONE_LOC
            cur_seq[b] = -1
    if st[ERR] == 0 and n_step_reqs:
        lat, rs_step, rs_deadline, rs_band = _step_room(lat, rs_step, rs_deadline, rs_band, n_lat,
                                                           n_rs + n_step_reqs)
        n_lat, n_rs = _end_step(lat, n_lat, step_us + step_cost, req_order, req_block, n_step_reqs,
                                rs_step, rs_deadline, rs_band, n_rs, deadline, band)
    return (st, counts, band_acc, band_miss, bg_wait, lat[:n_lat], rs_step[:n_rs], rs_deadline[:n_rs],
            rs_band[:n_rs], ops_step[:st[NOPS]], ops_op[:st[NOPS]], ops_block[:st[NOPS]], ops_charge[:st[NOPS]])


def _as(column: np.ndarray, dtype) -> np.ndarray:
    """The column itself when it already has `dtype` (a whole trace's copy is hundreds of MB per column)."""
    return np.ascontiguousarray(column, dtype=dtype)


def simulate_into(res, trace: Trace, policy: Policy, tiers: TierModel, band: np.ndarray, record: bool) -> None:
    """`simulator.simulate` for an eligible policy (see `eligible`), compiled: fills `res` (a SimResult; `band` is
    the trace's per-block priority band, simulator.band_of)."""
    policy.bind(trace)
    keys = np.asarray(policy.event_keys(trace), dtype=np.float64)
    keys, keys2 = (keys[0], keys[1]) if keys.ndim == 2 else (keys, np.zeros_like(keys))
    req = trace.block_request.astype(np.int64)
    lo = int(req.min()) if req.size else 0
    reqi = req - lo
    n_req = int(reqi.max()) + 1 if req.size else 1
    fast, slow = tiers.fast, tiers.slow
    out = _run(_as(trace.step, np.int64), _as(trace.kind, np.uint8), _as(trace.block, np.int32),
               _as(trace.critical, np.bool_), np.ascontiguousarray(keys), np.ascontiguousarray(keys2),
               bool(policy.uses_hints), _as(trace.block_size, np.int64), band, reqi, n_req,
               trace.block_deadline_us.astype(np.float64), int(tiers.fast_capacity), int(tiers.slow_capacity),
               float(fast.read_latency_us), float(fast.read_gbps), float(slow.read_latency_us),
               float(slow.read_gbps), float(slow.write_latency_us), float(slow.write_gbps), float(tiers.step_us),
               bool(record), START_CAP)
    st, counts, band_acc, band_miss, bg_wait, lat, rs_step, rs_deadline, rs_band = out[:9]
    if st[ERR] == ERR_FAST_FULL:
        raise UserError(f"fast tier ({tiers.fast_capacity} bytes) cannot hold a {int(st[ERR_ARG])}-byte block")
    if st[ERR] == ERR_SLOW_FULL:
        raise UserError(f"slow tier ({tiers.slow_capacity} bytes) is full: raise --slow-bytes")
    res.accesses, res.misses, res.dc_accesses, res.dc_misses = (int(x) for x in counts)
    res.band_accesses, res.band_misses = [int(x) for x in band_acc], [int(x) for x in band_miss]
    res.spills, res.spill_bytes, res.clean_evictions = int(st[SPILLS]), int(st[SPILL_BYTES]), int(st[CLEAN])
    res.background_wait_us = bg_wait
    res.step_latency_us, res.rs_step, res.rs_deadline_us, res.rs_band = lat, rs_step, rs_deadline, rs_band
    if record:
        res.ops = {"step": out[9], "op": out[10], "block": out[11].astype(np.int32), "charge": out[12]}
