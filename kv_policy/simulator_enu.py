"""The simulator's compiled loop for ExpectedNextUse and DeadlineAware (numba).

These policies use every hook of `simulator.simulate` that the event-keyed compiled loop (simulator_fast.py)
leaves out: prefetch on a hint, the look-ahead, background spills, recompute choices, per-step and raised keys,
keys that depend on the policy's own state. This module runs that whole loop compiled, with the policy's state
and hooks from enu_compiled.py: each function mirrors one closure of `simulate` statement for statement (same
order, same floating-point expressions), so the counts, step latencies, SLO records and the recorded operation log
are those of the Python loop with the Python policy (tests/policy/test_policy_enu_compiled.py). The Python loop and
the Python class stay the reference and the interface for new policies; a subclass that overrides anything runs
there. Memory: per-block and per-request arrays, a heap of a few times the resident blocks (superseded entries are
shed as in simulator_fast), and lists that grow as filled; nothing is sized by the number of events except the
operation log when one is recorded.
"""
from __future__ import annotations

import math

import numpy as np

from kv_policy.jit import njit  # first: it sets numba's cache settings, which numba reads when first imported
from numba.typed import List  # noqa: I001

from harness.errors import UserError
from kv_policy import enu_compiled as E
from kv_policy.enu_compiled import (BOOST, CLS, COPY, CUR_SEQ, LOC, PREF, READY_AT, REQ, REQI, TAIL, choose_recompute,
                                    key, on_evicted, raise_key)
from kv_policy.expected_next_use import DeadlineAware, ExpectedNextUse, LOOKAHEAD_PER_REQUEST
from kv_policy.policies import Policy
from kv_policy.simulator_fast import (START_CAP, _compacted, _end_step, _heap_pop, _heap_push, _step_room)
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace
from kv_policy import codes

FAST_LOC, SLOW_LOC, NONE_LOC, DROPPED_LOC = codes.LOC_FAST, codes.LOC_SLOW, codes.LOC_NONE, 3  # simulator.LOC_DROPPED
ACCESS, HINT, ALLOC = codes.ACCESS, codes.HINT, codes.ALLOC
SOON, DC, ROK = codes.PREFETCH_SOON, codes.DECODE_CRITICAL, codes.RECOMPUTE_OK
OP_HIT, OP_MISS, OP_ALLOC, OP_SPILL_SYNC, OP_SPILL_BG, OP_PREFETCH, OP_FREE, OP_DROP, OP_RECOMPUTE, \
    OP_EVICT_CLEAN = range(10)
CHARGED, DC_ACCESS = 1, 2
ERR_FAST_FULL, ERR_SLOW_FULL = 1, 2


def eligible(policy: Policy, trace: Trace) -> bool:
    """ExpectedNextUse or DeadlineAware themselves (a subclass may change any hook: it keeps the Python loop), on a
    trace whose steps are >= 0 (enu_compiled's `boost` convention and `young`'s calendar, indexed by step)."""
    return type(policy) in (ExpectedNextUse, DeadlineAware) and (len(trace) == 0 or int(trace.step[0]) >= 0)


@njit
def _op(st, ci, I, code, b, charge):
    """simulator.op: one recorded operation (called when recording: a typed List passed costs ~25 ns)."""
    n = st[E.NOPS]
    if n == I[E.I_OPS_OP].shape[0]:
        for s in (E.I_OPS_STEP, E.I_OPS_OP, E.I_OPS_BLOCK, E.I_OPS_CHARGE):
            I[s] = E.grown(I[s], n + 1)
    I[E.I_OPS_STEP][n] = st[E.CUR_STEP]
    I[E.I_OPS_OP][n] = code
    I[E.I_OPS_BLOCK][n] = b
    I[E.I_OPS_CHARGE][n] = charge
    st[E.NOPS] = n + 1


@njit
def _push(st, ft, cf, bu, bi, bf, H, b):
    """simulator.push: file b under its key now (the old entry goes stale). The heap `H` (keys, second keys, push
    ids, blocks) is sized over twice the most blocks the fast tier can hold (`heap_size`): shedding its superseded
    entries always leaves it at most half full, so it never grows."""
    st[E.PUSH_ID] += 1
    bi[CUR_SEQ, b] = st[E.PUSH_ID]
    k = key(ft, cf, bu, bi, bf, b, st[E.CUR_STEP])
    hk, hk2, hp, hb = H
    if st[E.HEAP_N] == hk.shape[0]:
        _compacted(hk, hk2, hp, hb, st, bu[LOC], bi[CUR_SEQ])
    st[E.HEAP_N] = _heap_push(hk, hk2, hp, hb, st[E.HEAP_N], k, 0.0, st[E.PUSH_ID], b)


@njit
def _peek(st, ft, ci, cf, bu, bi, bf, rq, H, F, I):
    """simulator.peek: the next victim (-1 when none is resident), raised keys filed again first."""
    while st[E.HEAP_N] > 0:
        hk, hk2, hp, hb = H
        v = hb[0]
        if bu[LOC, v] == FAST_LOC and bi[CUR_SEQ, v] == hp[0]:
            if ci[E.RAISES] and raise_key(st, ci, bu, bi, rq, I, v):
                _push(st, ft, cf, bu, bi, bf, H, v)
                continue
            return v
        st[E.HEAP_N] = _heap_pop(hk, hk2, hp, hb, st[E.HEAP_N])
    return -1


@njit
def _read_us(cf, sz):
    return cf[E.SLOW_RL] + sz / (cf[E.SLOW_RG] * 1e3)


@njit
def _write_us(cf, sz):
    return cf[E.SLOW_WL] + sz / (cf[E.SLOW_WG] * 1e3)


@njit
def _evict_for(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, need, sync, has_guard, guard):
    """simulator.evict_for: returns the spill cost, or -1.0 where it returns None (a prefetch would evict a better
    block); on an error st[ERR] is set and the caller returns at once (the Python loop raises)."""
    cost = 0.0
    while st[E.USED] + need > ci[E.CAP]:
        k = 0.0
        v = -1
        while st[E.HEAP_N] > 0:
            hk, hk2, hp, hb = H
            k, v = hk[0], hb[0]
            if bu[LOC, v] == FAST_LOC and bi[CUR_SEQ, v] == hp[0]:
                if ci[E.RAISES] and raise_key(st, ci, bu, bi, rq, I, v):
                    _push(st, ft, cf, bu, bi, bf, H, v)
                    continue
                break
            st[E.HEAP_N] = _heap_pop(hk, hk2, hp, hb, st[E.HEAP_N])
        if st[E.HEAP_N] == 0:
            st[E.ERR], st[E.ERR_ARG] = ERR_FAST_FULL, need
            return cost
        if has_guard and k >= guard:
            return -1.0
        st[E.HEAP_N] = _heap_pop(H[0], H[1], H[2], H[3], st[E.HEAP_N])
        sz = size[v]
        st[E.USED] -= sz
        bu[PREF, v] = 0
        if bu[COPY, v]:
            bu[LOC, v] = SLOW_LOC
            st[E.CLEAN] += 1
            if ci[E.RECORD]:
                _op(st, ci, I, OP_EVICT_CLEAN, v, 0)
            if ci[E.LOOKAHEAD]:
                on_evicted(st, bu, bi, bf, rq, F, I, v)
            continue
        if ci[E.CAN_RECOMPUTE] and bu[CLS, v] == ROK and \
                choose_recompute(ci, bu, v, _read_us(cf, sz), _write_us(cf, sz), sz * cf[E.RPB]):
            bu[LOC, v] = DROPPED_LOC
            st[E.DROPS] += 1
            if ci[E.RECORD]:
                _op(st, ci, I, OP_DROP, v, 0)
            continue
        slow_cap = ci[E.SLOW_CAP]
        if slow_cap and st[E.SLOW_USED] + sz > slow_cap:
            kept = I[E.I_KEPT]
            while st[E.SLOW_USED] + sz > slow_cap and st[E.KEPT_N] > 0:
                st[E.KEPT_N] -= 1
                x = kept[st[E.KEPT_N]]
                if bu[COPY, x] and bu[LOC, x] == FAST_LOC:
                    bu[COPY, x] = 0
                    st[E.SLOW_USED] -= size[x]
        if slow_cap and st[E.SLOW_USED] + sz > slow_cap:
            st[E.ERR] = ERR_SLOW_FULL
            return cost
        bu[LOC, v] = SLOW_LOC
        st[E.SLOW_USED] += sz
        st[E.SPILLS] += 1
        st[E.SPILL_BYTES] += sz
        cost += _write_us(cf, sz)
        bu[COPY, v] = 1 if rq[TAIL, bi[REQI, v]] != v else 0
        if sync:
            if ci[E.RECORD]:
                _op(st, ci, I, OP_SPILL_SYNC, v, CHARGED)
        else:
            if ci[E.RECORD]:
                _op(st, ci, I, OP_SPILL_BG, v, 0)
        if ci[E.LOOKAHEAD]:
            on_evicted(st, bu, bi, bf, rq, F, I, v)
    return cost


@njit
def _writes_nothing(ci, cf, bu, size, v):
    """simulator.writes_nothing."""
    if bu[COPY, v]:
        return True
    if ci[E.CAN_RECOMPUTE] and bu[CLS, v] == ROK:
        return choose_recompute(ci, bu, v, _read_us(cf, size[v]), _write_us(cf, size[v]), size[v] * cf[E.RPB])
    return False


@njit
def _bg_start(ft, cf, need):
    """simulator.bg_start: (admitted, start)."""
    now = ft[E.T0] + ft[E.STEP_COST]
    start = ft[E.DEV] if ft[E.DEV] > now else now
    if start + need > now + cf[E.BUDGET]:
        return False, 0.0
    return True, start


@njit
def _demand_wait(ft):
    w = ft[E.DEV] - (ft[E.T0] + ft[E.STEP_COST])
    if w > 0.0:
        ft[E.BG_WAIT] += w
        return w
    return 0.0


@njit
def _readback(st, ci, bu, I, b, sz):
    """simulator.readback."""
    if bu[COPY, b]:
        if ci[E.SLOW_CAP]:
            E.append(I, E.I_KEPT, st, E.KEPT_N, b)
    else:
        st[E.SLOW_USED] -= sz


@njit
def _prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b):
    """simulator.prefetch."""
    sz = size[b]
    extra = 0.0
    if st[E.USED] + sz > ci[E.CAP]:
        v = _peek(st, ft, ci, cf, bu, bi, bf, rq, H, F, I)   # free_victim
        free = not (v < 0 or st[E.USED] - size[v] + sz > ci[E.CAP]) and _writes_nothing(ci, cf, bu, size, v)
        if not free:
            extra = _write_us(cf, sz)
    need = _read_us(cf, sz) + extra
    ok, start = _bg_start(ft, cf, need)
    if not ok:
        st[E.PF_DROPPED] += 1
        return
    k = key(ft, cf, bu, bi, bf, b, st[E.CUR_STEP])
    spill_cost = _evict_for(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, sz, False, True, k)
    if st[E.ERR] or spill_cost == -1.0:
        return
    ft[E.DEV] = start + _read_us(cf, sz) + spill_cost
    bu[LOC, b] = FAST_LOC
    st[E.USED] += sz
    _readback(st, ci, bu, I, b, sz)
    bu[PREF, b] = 1
    bf[READY_AT, b] = ft[E.DEV]
    st[E.PREFETCHES] += 1
    if ci[E.RECORD]:
        _op(st, ci, I, OP_PREFETCH, b, 0)
    _push(st, ft, cf, bu, bi, bf, H, b)


@njit
def _try_prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b):
    """One nominated block through simulator.lookahead_prefetches: False when the pass stops."""
    if bu[LOC, b] != SLOW_LOC:
        return True
    before = st[E.PREFETCHES]
    _prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b)
    if st[E.ERR] or st[E.PREFETCHES] == before:
        return False
    E.append(I, E.I_BOOSTED, st, E.BOOSTED_N, b)
    return True


@njit
def _lookahead_prefetches(st, ft, ci, cf, bu, bi, bf, size, rq, rl, H, F, I):
    """simulator.lookahead_prefetches over ExpectedNextUse.lookahead / _nominate, interleaved as the generator is."""
    step = st[E.CUR_STEP]
    n_nxt = E.lookahead_start(st, rq, rl, F, I)
    tk = F[E.F_TOP_K]
    n = 0
    for j in range(n_nxt):
        r = rl[E.NXT, j]
        found, k, b = E.top(st, bu, bi, bf, rq, F, I, r)
        if found:
            n = E.top_push(tk, rl, n, k, b, r)
    for j in range(n_nxt):
        rq[E.TAKEN, rl[E.NXT, j]] = 0
    while n > 0:
        n, b, r = E.top_pop(tk, rl, n)
        bi[BOOST, b] = step
        if not _try_prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b):
            return
        rq[E.TAKEN, r] += 1
        if rq[E.TAKEN, r] < LOOKAHEAD_PER_REQUEST:
            found, k, b = E.top(st, bu, bi, bf, rq, F, I, r)
            if found:
                n = E.top_push(tk, rl, n, k, b, r)
    d = st[E.QDH]
    while d >= 0:
        b = rq[E.QD_BH, d]
        while b >= 0:
            if bu[LOC, b] == SLOW_LOC and not _try_prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b):
                return
            b = bi[E.QNEXT, b]
        d = rq[E.QD_NEXT, d]


@njit
def _clean(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I):
    """simulator.clean: background spills toward the free target while the I/O budget lasts."""
    target = ci[E.CLEAN_TARGET]
    while ci[E.CAP] - st[E.USED] < target:
        v = _peek(st, ft, ci, cf, bu, bi, bf, rq, H, F, I)
        if v < 0:
            break
        ok, start = _bg_start(ft, cf, 0.0 if _writes_nothing(ci, cf, bu, size, v) else _write_us(cf, size[v]))
        if not ok:
            break
        cost = _evict_for(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, ci[E.CAP] - st[E.USED] + 1, False, False, 0.0)
        if st[E.ERR]:
            return
        if cost:
            ft[E.DEV] = start + cost


@njit
def _new_step(st, ft, ci, cf, bu, bi, bf, size, rq, rl, H, F, I, s):
    """The end-of-step work of simulate's loop when step s begins (after end_step): lapsed keys, look-ahead,
    cleaner, the clock, re-keyed look-ahead blocks."""
    m, k = E.stale(st, bu, bi, bf, ci, cf, rq, rl, I)
    for slot, n in ((E.I_UNREAD, m), (E.I_RAISED, k), (E.I_DUE, st[E.N_DUE])):
        lapsed = I[slot]
        for j in range(n):
            x = lapsed[j]
            if bu[LOC, x] == FAST_LOC:
                _push(st, ft, cf, bu, bi, bf, H, x)
    n_exp = st[E.BOOSTED_N]   # expired, boosted = boosted, []
    I[E.I_EXPIRED], I[E.I_BOOSTED] = I[E.I_BOOSTED], I[E.I_EXPIRED]
    st[E.BOOSTED_N] = 0
    if cf[E.BUDGET] > 0:
        if ci[E.LOOKAHEAD]:
            _lookahead_prefetches(st, ft, ci, cf, bu, bi, bf, size, rq, rl, H, F, I)
            if st[E.ERR]:
                return
        if ci[E.CLEANER]:
            _clean(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I)
            if st[E.ERR]:
                return
    ft[E.T0] += cf[E.STEP_US] * (s - st[E.CUR_STEP]) + ft[E.STEP_COST]
    ft[E.STEP_COST] = 0.0
    st[E.CUR_STEP] = s
    if ci[E.LOOKAHEAD]:
        expired = I[E.I_EXPIRED]
        for j in range(n_exp):
            x = expired[j]
            if bu[PREF, x] and bu[LOC, x] == FAST_LOC:
                _push(st, ft, cf, bu, bi, bf, H, x)


@njit
def _miss(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b, crit):
    """An ACCESS of a block that is not resident: its cost (simulate's ACCESS branch, miss side)."""
    sz = size[b]
    dropped = bu[LOC, b] == DROPPED_LOC
    if dropped:
        st[E.RECOMPUTES] += 1
    elif bu[LOC, b] == SLOW_LOC:
        bu[LOC, b] = FAST_LOC
        _readback(st, ci, bu, I, b, sz)
    spill = _evict_for(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, sz, True, False, 0.0)
    if st[E.ERR]:
        return 0.0
    io = spill if dropped else _read_us(cf, sz) + spill
    wait = _demand_wait(ft) if io > 0.0 else 0.0
    if io > 0.0:
        ft[E.DEV] = ft[E.T0] + ft[E.STEP_COST] + wait + io
    cost = wait + io + (sz * cf[E.RPB] if dropped else 0.0)
    if ci[E.RECORD]:
        _op(st, ci, I, OP_RECOMPUTE if dropped else OP_MISS, b, DC_ACCESS if crit else CHARGED)
    bu[LOC, b] = FAST_LOC
    st[E.USED] += sz
    if not crit:
        ft[E.STEP_COST] += cost
    return cost


@njit
def _alloc(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b, c):
    """An ALLOC event (simulate's ALLOC branch)."""
    bu[CLS, b] = c
    rq[TAIL, bi[REQI, b]] = b
    if bu[COPY, b]:
        bu[COPY, b] = 0
        if bu[LOC, b] == FAST_LOC:
            st[E.SLOW_USED] -= size[b]
    if bu[LOC, b] != FAST_LOC:
        if bu[LOC, b] == SLOW_LOC:
            st[E.SLOW_USED] -= size[b]
        spill = _evict_for(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, size[b], True, False, 0.0)
        if st[E.ERR]:
            return
        if spill > 0.0:
            spill += _demand_wait(ft)
            ft[E.STEP_COST] += spill
            ft[E.DEV] = ft[E.T0] + ft[E.STEP_COST]
        bu[LOC, b] = FAST_LOC
        st[E.USED] += size[b]
    if ci[E.RECORD]:
        _op(st, ci, I, OP_ALLOC, b, 0)
    _push(st, ft, cf, bu, bi, bf, H, b)


@njit
def _free(st, ci, bu, bi, size, b):
    """A FREE event."""
    if bu[LOC, b] == FAST_LOC:
        st[E.USED] -= size[b]
        if bu[COPY, b]:
            st[E.SLOW_USED] -= size[b]
    elif bu[LOC, b] == SLOW_LOC:
        st[E.SLOW_USED] -= size[b]
    bu[COPY, b] = 0
    bu[LOC, b] = NONE_LOC
    bi[CUR_SEQ, b] = -1
    bu[PREF, b] = 0


@njit
def _run(steps, kinds, blocks, crits, hints, st, ft, ci, cf, bu, bi, bf, size, band, deadline, rq, rl, H, F, I,
         start_cap):
    """simulate's event loop; returns the counts and the per-step columns."""
    n = steps.shape[0]
    counts = np.zeros(4, dtype=np.int64)          # accesses, misses, dc_accesses, dc_misses
    band_acc = np.zeros(3, dtype=np.int64)
    band_miss = np.zeros(3, dtype=np.int64)
    lat = np.zeros(start_cap, dtype=np.float64)
    rs_step = np.zeros(start_cap, dtype=np.int64)
    rs_deadline = np.zeros(start_cap, dtype=np.float64)
    rs_band = np.zeros(start_cap, dtype=np.int64)
    n_lat = n_rs = n_step_reqs = 0
    step_mark = 1
    st[E.CUR_STEP] = steps[0] if n > 0 else 0
    hk, hk2, hp, hb = H
    for i in range(n):
        s = steps[i]
        if s != st[E.CUR_STEP]:
            if n_step_reqs:
                lat, rs_step, rs_deadline, rs_band = _step_room(lat, rs_step, rs_deadline, rs_band, n_lat,
                                                                   n_rs + n_step_reqs)
                n_lat, n_rs = _end_step(lat, n_lat, cf[E.STEP_US] + ft[E.STEP_COST], rl[E.STEP_ORDER],
                                        rq[E.STEP_BLOCK], n_step_reqs, rs_step, rs_deadline, rs_band, n_rs,
                                        deadline, band)
                n_step_reqs = 0
                step_mark += 1
            _new_step(st, ft, ci, cf, bu, bi, bf, size, rq, rl, H, F, I, s)
            if st[E.ERR]:
                break
        k = kinds[i]
        b = blocks[i]
        crit = crits[i]
        if crit and k == ACCESS:  # ExpectedNextUse.on_event's decode read, in line (most events are one)
            if not st[E.P_STEP_SET] or s != st[E.P_STEP]:
                E.new_step(st, ft, cf, s)
            if st[E.UNREAD_N] > 0:
                bu[E.UNREAD, b] = 0
            ri = bi[REQI, b]
            if rq[E.DEC_MARK, ri] != st[E.EPOCH]:
                rq[E.DEC_MARK, ri] = st[E.EPOCH]
                rl[E.DEC_LIST, st[E.N_DEC]] = ri
                st[E.N_DEC] += 1
            rq[E.DONE_MARK, ri] = st[E.DONE_EPOCH]
            bi[BOOST, b] = E.ABSENT
            if not bu[E.LAYOUT, b]:
                st[E.HH_READS] += 1
                bu[E.HHSEEN, b] = 1
                if ci[E.YOUNG_ON]:
                    bf[E.SCORE, b] = E.lse(bf[E.BASE, b], cf[E.LAM] * s)
                    E.aged(st, cf, bi, bf, I, b, s, False)
                else:
                    bf[E.SCORE, b] = E.lse(bf[E.SCORE, b], cf[E.LAM] * s)
        else:
            ev = E.on_event(st, ft, ci, cf, bu, bi, bf, rq, rl, k, b, s, crit, hints[i])
            if ev:
                if ev & E.EV_UNREAD:
                    E.append(I, E.I_UNREAD, st, E.UNREAD_N, b)
                if ev & E.EV_AGED:
                    E.aged(st, cf, bi, bf, I, b, s, (ev & E.EV_BORN) != 0)
        if k == ACCESS:
            counts[0] += 1
            miss = bu[LOC, b] != FAST_LOC
            if not miss:  # simulate's hit, in line
                sz = size[b]
                cost = cf[E.FAST_RL] + sz / (cf[E.FAST_RG] * 1e3)
                if bu[PREF, b]:
                    st[E.PF_USED] += 1
                    bu[PREF, b] = 0
                    wait = bf[READY_AT, b] - (ft[E.T0] + ft[E.STEP_COST])
                    if crit and wait > 0.0:
                        cost += wait
                        ft[E.BG_WAIT] += wait
                if ci[E.RECORD]:
                    _op(st, ci, I, OP_HIT, b, DC_ACCESS if crit else 0)
            else:
                cost = _miss(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b, crit)
                if st[E.ERR]:
                    break
            if miss:
                counts[1] += 1
            if crit:
                ft[E.STEP_COST] += cost
                counts[2] += 1
                bd = band[b]
                band_acc[bd] += 1
                if miss:
                    counts[3] += 1
                    band_miss[bd] += 1
                r = bi[REQI, b]
                if rq[E.STEP_MARK, r] != step_mark:
                    rq[E.STEP_MARK, r] = step_mark
                    rl[E.STEP_ORDER, n_step_reqs] = r
                    n_step_reqs += 1
                rq[E.STEP_BLOCK, r] = b
                if bu[CLS, b] == SOON:
                    bu[CLS, b] = DC
            st[E.PUSH_ID] += 1  # _push(b), in line on the busiest path
            bi[CUR_SEQ, b] = st[E.PUSH_ID]
            kb = E.key_of(cf[E.LAM], st[E.CUR_STEP], bu[CLS, b], bu[E.LAYOUT, b], bu[E.UNREAD, b], bi[BOOST, b],
                          bu[E.QUEUED, b], bf[E.SCORE, b], bf[E.LOGW, b], ft[E.LOG_H], ft[E.LOG_PH], ft[E.P],
                          cf[E.QUEUE_LOG], cf[E.HORIZON])
            if st[E.HEAP_N] == hk.shape[0]:
                _compacted(hk, hk2, hp, hb, st, bu[LOC], bi[CUR_SEQ])
            st[E.HEAP_N] = _heap_push(hk, hk2, hp, hb, st[E.HEAP_N], kb, 0.0, st[E.PUSH_ID], b)
        elif k == HINT:
            c = hints[i]
            bu[CLS, b] = c
            if bu[LOC, b] == FAST_LOC:
                _push(st, ft, cf, bu, bi, bf, H, b)   # uses_hints
            elif bu[LOC, b] == SLOW_LOC and c == SOON:  # prefetch_on_hint
                _prefetch(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b)
                if st[E.ERR]:
                    break
        elif k == ALLOC:
            _alloc(st, ft, ci, cf, bu, bi, bf, size, rq, H, F, I, b, hints[i])
            if st[E.ERR]:
                break
        else:
            if ci[E.RECORD] and bu[LOC, b] != NONE_LOC:
                _op(st, ci, I, OP_FREE, b, 0)
            _free(st, ci, bu, bi, size, b)
    if st[E.ERR] == 0 and n_step_reqs:
        lat, rs_step, rs_deadline, rs_band = _step_room(lat, rs_step, rs_deadline, rs_band, n_lat,
                                                           n_rs + n_step_reqs)
        n_lat, n_rs = _end_step(lat, n_lat, cf[E.STEP_US] + ft[E.STEP_COST], rl[E.STEP_ORDER], rq[E.STEP_BLOCK],
                                n_step_reqs, rs_step, rs_deadline, rs_band, n_rs, deadline, band)
    return counts, band_acc, band_miss, lat[:n_lat], rs_step[:n_rs], rs_deadline[:n_rs], rs_band[:n_rs]


def _constants(policy: ExpectedNextUse, tiers: TierModel, record: bool) -> tuple[np.ndarray, np.ndarray]:
    """The policy's parameters and the tier model as the compiled loop's constant arrays."""
    ci = np.zeros(E.N_CI, dtype=np.int64)
    cf = np.zeros(E.N_CF, dtype=np.float64)
    cap, budget = int(tiers.fast_capacity), tiers.io_budget_us
    ci[[E.CAP, E.SLOW_CAP, E.RAISE_CAP, E.FRESH_FIRST, E.RAISES, E.LOOKAHEAD, E.SPILL_REUSED, E.QUEUE_ON,
        E.CAN_RECOMPUTE, E.RECORD, E.CLEAN_TARGET, E.CLEANER, E.YOUNG_ON]] = [
        cap, int(tiers.slow_capacity), policy.raise_cap, policy.fresh_first, policy.raises_keys,
        policy.prefetch_lookahead, policy.spill_reused, policy.queue_log is not None,
        math.isfinite(tiers.recompute_us_per_byte), record, int(policy.free_target * cap),
        policy.free_target > 0 and math.isfinite(budget) and budget > 0, policy.young > 0]
    fast, slow = tiers.fast, tiers.slow
    cf[[E.FAST_RL, E.FAST_RG, E.SLOW_RL, E.SLOW_RG, E.SLOW_WL, E.SLOW_WG, E.STEP_US, E.BUDGET, E.RPB, E.LAM,
        E.HORIZON, E.PRIOR_SCALE, E.QUEUE_LOG, E.FRESH_SHARE, E.YOUNG]] = [
        fast.read_latency_us, fast.read_gbps, slow.read_latency_us, slow.read_gbps, slow.write_latency_us,
        slow.write_gbps, tiers.step_us, budget, tiers.recompute_us_per_byte, policy.lam, policy.horizon,
        policy.prior_scale, policy.queue_log if policy.queue_log is not None else 0.0, policy.fresh_share,
        policy.young]
    return ci, cf


@njit
def _lists(start_cap, n_req, raise_cap, ops, cal):
    """The growable lists (enu_compiled's F_ and I_ slots), built compiled: a typed List filled from Python compiles
    its methods in every process (half a second). `young`'s calendar heads and tails are `cal` long (-1: empty)."""
    F = List()
    for n in (start_cap, start_cap, start_cap, start_cap, n_req):
        F.append(np.zeros(n))
    I = List()
    for n in (start_cap, start_cap, start_cap, start_cap, start_cap, start_cap, start_cap, start_cap, start_cap,
              raise_cap, ops, ops, ops, ops):
        I.append(np.zeros(n, dtype=np.int64))
    for n in (cal, cal, start_cap, start_cap, start_cap, start_cap):
        I.append(np.full(n, -1, dtype=np.int64))
    return F, I


def heap_size(trace: Trace, cap: int, start_cap: int) -> int:
    """Entries of the victim heap: over twice the most blocks the fast tier can hold at once (its smallest blocks),
    so that shedding superseded entries from a full heap always leaves it at most half full."""
    held = int(np.searchsorted(np.cumsum(np.sort(trace.block_size.astype(np.int64))), cap, side="right"))
    return max(start_cap, 2 * (held + 2))


def _state(policy: ExpectedNextUse, trace: Trace, lo: int, n_req: int, cap: int, record: bool, start_cap: int):
    """The loop's state arrays, as ExpectedNextUse.bind and simulate's set-up leave them."""
    nb = trace.n_blocks
    st = np.zeros(E.N_ST, dtype=np.int64)
    st[[E.ADMITTING, E.RAISED_STEP, E.EPOCH, E.DONE_EPOCH, E.BATCH_EPOCH, E.QDH, E.QDT, E.LO, E.DUE_LAST,
        E.CAL_FREE]] = [-1, -1, 1, 1, 1, -1, -1, lo, -1, -1]
    ft = np.zeros(E.N_FT, dtype=np.float64)
    ft[[E.P, E.LOG_H, E.LOG_PH, E.HH_PD, E.MEAN_BLOCKS]] = [policy.p, policy.log_h, policy.log_ph,
                                                           policy.hh_per_decode, policy.mean_blocks]
    bu = np.zeros((E.N_BU, nb), dtype=np.uint8)
    bu[CLS] = codes.WARM
    bi = np.zeros((E.N_BI, nb), dtype=np.int64)
    bi[CUR_SEQ] = -1
    bi[BOOST] = E.ABSENT
    bi[REQ] = trace.block_request
    bi[REQI] = bi[REQ] - lo
    bf = np.zeros((E.N_BF, nb), dtype=np.float64)
    bf[E.LOGW] = policy.logw
    rq = np.zeros((E.N_RQ, n_req), dtype=np.int64)
    rq[TAIL] = -1
    rl = np.zeros((E.N_RL, n_req), dtype=np.int64)
    hn = heap_size(trace, cap, start_cap)
    H = (np.zeros(hn), np.zeros(hn), np.zeros(hn, dtype=np.int64), np.zeros(hn, dtype=np.int64))
    cal = int(trace.step.max()) + 2 if policy.young and len(trace) else 1   # steps a checkpoint can fall in
    F, I = _lists(start_cap, n_req, max(1, policy.raise_cap), 2 * len(trace) + 1 if record else 1, cal)
    return st, ft, bu, bi, bf, rq, rl, H, F, I


def simulate_into(res, trace: Trace, policy: ExpectedNextUse, tiers: TierModel, band: np.ndarray,
                  record: bool) -> None:
    """`simulator.simulate` for ExpectedNextUse or DeadlineAware (see `eligible`), compiled: fills `res` (a
    SimResult; `band` is the trace's per-block priority band, simulator.band_of)."""
    policy.bind(trace)
    req = trace.block_request.astype(np.int64)
    lo = min(int(req.min()), 0) if req.size else 0
    n_req = int(req.max()) - lo + 1 if req.size else 1
    ci, cf = _constants(policy, tiers, record)
    st, ft, bu, bi, bf, rq, rl, H, F, I = _state(policy, trace, lo, n_req, int(tiers.fast_capacity), record,
                                                  START_CAP)
    out = _run(np.ascontiguousarray(trace.step, dtype=np.int64), np.ascontiguousarray(trace.kind, dtype=np.uint8),
               np.ascontiguousarray(trace.block, dtype=np.int32), np.ascontiguousarray(trace.critical, dtype=np.bool_),
               np.ascontiguousarray(trace.cls, dtype=np.uint8), st, ft, ci, cf, bu, bi, bf,
               np.ascontiguousarray(trace.block_size, dtype=np.int64), band,
               trace.block_deadline_us.astype(np.float64), rq, rl, H, F, I, START_CAP)
    if st[E.ERR] == ERR_FAST_FULL:
        raise UserError(f"fast tier ({tiers.fast_capacity} bytes) cannot hold a {int(st[E.ERR_ARG])}-byte block")
    if st[E.ERR] == ERR_SLOW_FULL:
        raise UserError(f"slow tier ({tiers.slow_capacity} bytes) is full: raise --slow-bytes")
    counts, band_acc, band_miss, lat, rs_step, rs_deadline, rs_band = out
    res.accesses, res.misses, res.dc_accesses, res.dc_misses = (int(x) for x in counts)
    res.band_accesses, res.band_misses = [int(x) for x in band_acc], [int(x) for x in band_miss]
    res.spills, res.spill_bytes, res.clean_evictions = int(st[E.SPILLS]), int(st[E.SPILL_BYTES]), int(st[E.CLEAN])
    res.drops, res.recomputes, res.prefetches = int(st[E.DROPS]), int(st[E.RECOMPUTES]), int(st[E.PREFETCHES])
    res.prefetch_used, res.prefetch_dropped = int(st[E.PF_USED]), int(st[E.PF_DROPPED])
    res.background_wait_us = float(ft[E.BG_WAIT])
    res.step_latency_us, res.rs_step, res.rs_deadline_us, res.rs_band = lat, rs_step, rs_deadline, rs_band
    if record:
        nops = int(st[E.NOPS])
        res.ops = {"step": I[E.I_OPS_STEP][:nops].copy(), "op": I[E.I_OPS_OP][:nops].astype(np.uint8),
                   "block": I[E.I_OPS_BLOCK][:nops].astype(np.int32), "charge": I[E.I_OPS_CHARGE][:nops].astype(np.uint8)}
