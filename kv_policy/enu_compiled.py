"""ExpectedNextUse's (and DeadlineAware's) state and hooks, compiled (numba), for kv_policy/simulator_enu.py.

Each function mirrors one method of kv_policy/expected_next_use.py statement for statement, with the same
floating-point expressions in the same order, so the compiled loop makes the Python policy's decisions (tests:
tests/policy/test_policy_enu_compiled.py). The Python class stays the reference and the interface new policies
use. Python's dicts and sets become per-block and per-request arrays:
* a set cleared every step (decoded, entering, leaving, done_now, batch_now) is a mark row compared with an epoch
  that the clear increments, plus a list where the set is iterated or counted;
* `boost` (block -> step) is a per-block row with -2 for "absent" (`boost.get(b, -2)`; a stored value is a step
  >= -1, and the compiled loop runs only traces whose steps are >= 0, where `key`'s `if self.boost` shortcut and
  the lookup agree);
* `spilled` (request -> max-heap of evicted candidates) is one pool of per-request heap segments, moved to the pool's
  end when they fill and packed when the pool fills (entries of a finished request are dropped with it);
* `queued_docs` (document -> its queue-hinted blocks, in insertion order) is a linked list of documents, each with a
  linked list of blocks: the look-ahead walks them in the dict's order;
* `young`'s calendar `due` (step -> (block, version) list) is a linked list per step (head and tail per step up to
  the trace's last + 1: a later step is never taken) over a pool of entries recycled through a free list, so it holds
  only the entries not yet taken.
Per request the arrays are indexed by `block_request - lo` (shared documents have negative request ids).
"""
from __future__ import annotations

import math

import numpy as np

from kv_policy import codes
from kv_policy import expected_next_use as enu
from kv_policy.expected_next_use import LAYOUT_FIRST, LOG_NEVER, NOMINAL_BLOCKS, P_EMA, YOUNG_RATIO
from kv_policy.jit import njit
from kv_policy.simulator_fast import _grown_f as grown_f, _grown_i as grown

SOON, WARM_C, COLD, ROK, DC = (codes.PREFETCH_SOON, codes.WARM, codes.COLD_SPILLABLE, codes.RECOMPUTE_OK,
                               codes.DECODE_CRITICAL)
ACCESS, HINT, ALLOC = codes.ACCESS, codes.HINT, codes.ALLOC
SLOW_LOC = codes.LOC_SLOW
ABSENT = -2      # `boost` has no entry for the block
POOL_START = 1 << 12

# Per-block uint8 rows (`bu`): the simulator's, then the policy's.
LOC, CLS, PREF, COPY, LAYOUT, FRESH, UNREAD, HHSEEN, QUEUED = range(9)
N_BU = 9
# Per-block int64 rows (`bi`).
CUR_SEQ, EVICTED_AT, BOOST, QNEXT, QPREV, REQ, REQI, BORN, VER = range(9)
N_BI = 9
# Per-block float64 rows (`bf`).
READY_AT, SCORE, LOGW, BASE = range(4)
N_BF = 4
# Per-request int64 rows (`rq`).
(TAIL, LIVE, CTX_HAS, CTX_N, DEC_MARK, ENT_MARK, LEAVE_MARK, DONE_MARK, BATCH_MARK, SP_EXISTS, SP_START, SP_LEN,
 SP_CAP, QD_IN, QD_NEXT, QD_PREV, QD_BH, QD_BT, TAKEN, NOM_MARK, STEP_MARK, STEP_BLOCK) = range(22)
N_RQ = 22
# Per-request lists (`rl` rows, each n_req long).
DEC_LIST, ENT_LIST, NXT, TOP_B, TOP_R, STEP_ORDER = range(6)
N_RL = 6
# Integer state (`st`): the simulator's first (simulator_fast's slots 0-10), then the policy's.
(USED, SLOW_USED, PUSH_ID, HEAP_N, KEPT_N, NOPS, ERR, ERR_ARG, CLEAN, SPILLS, SPILL_BYTES, DROPS, RECOMPUTES,
 PREFETCHES, PF_USED, PF_DROPPED, CUR_STEP, UNREAD_N, BOOSTED_N, HELD_N, POOL_TOP, P_STEP, P_STEP_SET, HH_READS,
 LIVE_BLOCKS, N_LIVE, ADMITTING, N_RAISED, RAISED_STEP, EVICTIONS, MARK, EPOCH, N_DEC, N_ENT, DONE_EPOCH,
 BATCH_EPOCH, NOM_EPOCH, QDH, QDT, LO, DUE_LAST, CAL_FREE, CAL_TOP, N_DUE) = range(44)
N_ST = 44
# Float state (`ft`).
STEP_COST, T0, DEV, BG_WAIT, P, LOG_H, LOG_PH, HH_PD, MEAN_BLOCKS = range(9)
N_FT = 9
# Integer constants (`ci`).
CAP, SLOW_CAP, RAISE_CAP, FRESH_FIRST, RAISES, LOOKAHEAD, SPILL_REUSED, QUEUE_ON, CAN_RECOMPUTE, RECORD, \
    CLEAN_TARGET, CLEANER, YOUNG_ON = range(13)
N_CI = 13
# Float constants (`cf`).
FAST_RL, FAST_RG, SLOW_RL, SLOW_RG, SLOW_WL, SLOW_WG, STEP_US, BUDGET, RPB, LAM, HORIZON, PRIOR_SCALE, QUEUE_LOG, \
    FRESH_SHARE, YOUNG = range(15)
N_CF = 15
# Growable float64 arrays (typed List `F`) and int64 arrays (`I`).
F_HK, F_HK2, F_HELD_K, F_POOL_K, F_TOP_K = range(5)
(I_HP, I_HB, I_KEPT, I_UNREAD, I_BOOSTED, I_EXPIRED, I_HELD_B, I_HELD_R, I_POOL_B, I_RAISED, I_OPS_STEP, I_OPS_OP,
 I_OPS_BLOCK, I_OPS_CHARGE, I_CAL_HEAD, I_CAL_TAIL, I_CAL_B, I_CAL_V, I_CAL_NEXT, I_DUE) = range(20)
# on_event's answer (bits): b joins `unread_now`; `young`'s _aged is due for b (the caller runs it); ... as born.
EV_UNREAD, EV_AGED, EV_BORN = 1, 2, 4
young_correction = njit(enu.young_correction)   # the Python functions themselves, compiled: the same expressions
checkpoint_age = njit(enu.checkpoint_age)


@njit
def append(I, slot, st, count_slot, x):
    """Append `x` to the growable list `I[slot]` whose length is `st[count_slot]`."""
    a = I[slot]
    n = st[count_slot]
    if n == a.shape[0]:
        a = grown(a, n + 1)
        I[slot] = a
    a[n] = x
    st[count_slot] = n + 1


@njit
def key_of(lam, step, c, layout, unread, boost, queued, score, logw, log_h, log_ph, p, queue_log, horizon):
    """ExpectedNextUse.key from the block's fields (scalars: a call passing the state arrays costs their reference
    counts, tens of ns on every event)."""
    if c >= COLD and c != ROK:
        return lam * step + LOG_NEVER + logw
    if layout:
        return lam * step + (log_h if c <= SOON else log_ph) + LAYOUT_FIRST
    if unread:
        return lam * step + log_h + LAYOUT_FIRST
    if boost >= step - 1:
        return score + logw - math.log(p)
    if queued:
        q = lam * step + queue_log + math.log(horizon)
        s = score + logw
        return q if q > s else s
    return score + logw


@njit
def key(ft, cf, bu, bi, bf, b, step):
    """ExpectedNextUse.key of block b (its class is the simulator's row CLS)."""
    return key_of(cf[LAM], step, bu[CLS, b], bu[LAYOUT, b], bu[UNREAD, b], bi[BOOST, b], bu[QUEUED, b], bf[SCORE, b],
                  bf[LOGW, b], ft[LOG_H], ft[LOG_PH], ft[P], cf[QUEUE_LOG], cf[HORIZON])


@njit
def _prior(st, ft, cf, bi, rq, b, step):
    """ExpectedNextUse._prior."""
    r = bi[REQ, b]
    ri = bi[REQI, b]
    if r < 0:
        n = ft[MEAN_BLOCKS]
    elif rq[CTX_HAS, ri]:
        if rq[LIVE, ri] > 0:
            n = float(max(rq[LIVE, ri], rq[CTX_N, ri]))
        else:
            n = float(rq[CTX_N, ri])
    else:
        n = float(max(rq[LIVE, ri], NOMINAL_BLOCKS))
    rate = ft[P] * ft[HH_PD] / max(1.0, n)
    return cf[LAM] * step + math.log(rate * cf[HORIZON] * cf[PRIOR_SCALE])


@njit
def lse(s, x):
    """log(exp(s) + exp(x)), as on_event writes it."""
    return (s + math.log1p(math.exp(x - s))) if s > x else (x + math.log1p(math.exp(s - x)))


@njit
def new_step(st, ft, cf, step):
    """ExpectedNextUse._new_step: the decode probability and reads per decode from the step that ended."""
    if st[N_DEC] > 0 and st[N_LIVE] > 0:
        ft[P] += P_EMA * (min(1.0, st[N_DEC] / st[N_LIVE]) - ft[P])
        ft[HH_PD] += P_EMA * (st[HH_READS] / st[N_DEC] - ft[HH_PD])
        ft[MEAN_BLOCKS] = st[LIVE_BLOCKS] / st[N_LIVE]
    st[EPOCH] += 1   # decoded, entering, leaving cleared
    st[N_DEC] = 0
    st[N_ENT] = 0
    st[HH_READS] = 0
    st[P_STEP] = step
    st[P_STEP_SET] = 1
    ft[LOG_PH] = math.log(ft[P] * cf[HORIZON])


@njit
def _queue(st, bi, rq, b, ri):
    """queued_docs.setdefault(r, []).append(b)."""
    if not rq[QD_IN, ri]:
        rq[QD_IN, ri] = 1
        rq[QD_BH, ri] = -1
        rq[QD_BT, ri] = -1
        rq[QD_NEXT, ri] = -1
        rq[QD_PREV, ri] = st[QDT]
        if st[QDT] >= 0:
            rq[QD_NEXT, st[QDT]] = ri
        else:
            st[QDH] = ri
        st[QDT] = ri
    t = rq[QD_BT, ri]
    bi[QPREV, b] = t
    bi[QNEXT, b] = -1
    if t >= 0:
        bi[QNEXT, t] = b
    else:
        rq[QD_BH, ri] = b
    rq[QD_BT, ri] = b


@njit
def _unqueue(st, bu, bi, rq, b, ri):
    """ExpectedNextUse._unqueue: the block leaves its document's list, an emptied document leaves the dict."""
    bu[QUEUED, b] = 0
    if not rq[QD_IN, ri]:
        return
    p, n = bi[QPREV, b], bi[QNEXT, b]
    if p >= 0:
        bi[QNEXT, p] = n
    else:
        rq[QD_BH, ri] = n
    if n >= 0:
        bi[QPREV, n] = p
    else:
        rq[QD_BT, ri] = p
    if rq[QD_BH, ri] < 0:
        rq[QD_IN, ri] = 0
        dp, dn = rq[QD_PREV, ri], rq[QD_NEXT, ri]
        if dp >= 0:
            rq[QD_NEXT, dp] = dn
        else:
            st[QDH] = dn
        if dn >= 0:
            rq[QD_PREV, dn] = dp
        else:
            st[QDT] = dp


@njit
def on_event(st, ft, ci, cf, bu, bi, bf, rq, rl, kind, b, step, critical, c):
    """ExpectedNextUse.on_event for every event but a decode read (its busiest case, which simulator_enu._run
    handles in line after the same first two statements); its answer's bits (EV_*) say what the caller does next
    (append b to `unread_now`; `young`'s `aged`, the last statement of its branch): the lists are not passed on
    every event."""
    if not st[P_STEP_SET] or step != st[P_STEP]:
        new_step(st, ft, cf, step)
    if st[UNREAD_N] > 0:
        bu[UNREAD, b] = 0
    ri = bi[REQI, b]
    r = bi[REQ, b]
    out = 0
    aged = EV_AGED if ci[YOUNG_ON] else 0
    if kind == ACCESS:
        if not bu[LAYOUT, b]:
            a = st[ADMITTING]
            if a >= 0:  # (ctx[-1], before any admission, is never read)
                ai = a - st[LO]
                rq[CTX_N, ai] = (rq[CTX_N, ai] if rq[CTX_HAS, ai] else 0) + 1
                rq[CTX_HAS, ai] = 1
            if bu[FRESH, b]:
                bu[FRESH, b] = 0
                bf[SCORE, b] = _prior(st, ft, cf, bi, rq, b, step)
                out = aged | (EV_BORN if aged else 0)
            else:
                bf[SCORE, b] = lse(bf[BASE, b] if aged else bf[SCORE, b], _prior(st, ft, cf, bi, rq, b, step))
                out = aged
    elif kind == HINT:
        if critical:
            bu[LAYOUT, b] = 1
            if c == SOON:
                if rq[ENT_MARK, ri] != st[EPOCH]:
                    rq[ENT_MARK, ri] = st[EPOCH]
                    rl[ENT_LIST, st[N_ENT]] = ri
                    st[N_ENT] += 1
            elif c == WARM_C:
                rq[LEAVE_MARK, ri] = st[EPOCH]
        elif c == SOON:
            if ci[QUEUE_ON] and not bu[QUEUED, b]:
                bu[QUEUED, b] = 1
                _queue(st, bi, rq, b, ri)
        elif bu[LAYOUT, b]:
            bu[LAYOUT, b] = 0
            bf[SCORE, b] = _prior(st, ft, cf, bi, rq, b, step)
            out = aged | (EV_BORN if aged else 0)  # (the unqueue below touches none of aged's fields)
            if bu[QUEUED, b]:
                _unqueue(st, bu, bi, rq, b, ri)
        elif bu[QUEUED, b]:
            _unqueue(st, bu, bi, rq, b, ri)
    elif kind == ALLOC:
        if r >= 0:
            if rq[LIVE, ri] == 0:
                st[N_LIVE] += 1
            rq[LIVE, ri] += 1
            if not rq[CTX_HAS, ri]:
                st[ADMITTING] = r
        st[LIVE_BLOCKS] += 1
        bu[LAYOUT, b] = 1 if c == DC else 0
        bu[FRESH, b] = 1
        if ci[FRESH_FIRST] and c != DC and (r < 0 or st[UNREAD_N] < cf[FRESH_SHARE] * st[LIVE_BLOCKS]):
            bu[UNREAD, b] = 1
            out = EV_UNREAD
        bf[SCORE, b] = _prior(st, ft, cf, bi, rq, b, step)
        out |= aged | (EV_BORN if aged else 0)
    else:  # FREE
        st[LIVE_BLOCKS] -= 1
        bi[BOOST, b] = ABSENT
        if r >= 0 and rq[LIVE, ri] > 0:
            left = rq[LIVE, ri] - 1
            rq[LIVE, ri] = left
            if not left:
                st[N_LIVE] -= 1
                rq[CTX_HAS, ri] = 0
                rq[CTX_N, ri] = 0
                rq[SP_EXISTS, ri] = 0
                rq[SP_LEN, ri] = 0
                rq[SP_CAP, ri] = 0
    return out


@njit
def aged(st, cf, bi, bf, I, b, step, born):
    """ExpectedNextUse._aged: the static log-score just set becomes the base (the block's birth when `born`), and
    the key gets its exposure term."""
    bf[BASE, b] = bf[SCORE, b]
    if born:
        bi[BORN, b] = step
    refresh(st, cf, bi, bf, I, b, step)


@njit
def refresh(st, cf, bi, bf, I, b, step):
    """ExpectedNextUse._refresh: the key at the block's age, a new version, its next checkpoint filed."""
    age = step - bi[BORN, b]
    bf[SCORE, b] = bf[BASE, b] + young_correction(cf[YOUNG], cf[LAM], age)
    bi[VER, b] += 1
    nxt = checkpoint_age(cf[YOUNG], cf[LAM], age, YOUNG_RATIO)
    if nxt is not None:
        _file(st, I, bi[BORN, b] + nxt, b, bi[VER, b])


@njit
def _file(st, I, t, b, v):
    """due.setdefault(t, []).append((b, v)): an entry (from the free list, or a new one) at the tail of step t's
    list; a step past the calendar (the trace's last + 1) is never taken, so nothing is filed there."""
    head, tail = I[I_CAL_HEAD], I[I_CAL_TAIL]
    if t >= head.shape[0]:
        return
    e = st[CAL_FREE]
    if e >= 0:
        st[CAL_FREE] = I[I_CAL_NEXT][e]
    else:
        e = st[CAL_TOP]
        if e == I[I_CAL_B].shape[0]:
            for s in (I_CAL_B, I_CAL_V, I_CAL_NEXT):
                I[s] = grown(I[s], e + 1)
        st[CAL_TOP] = e + 1
    nxt = I[I_CAL_NEXT]
    I[I_CAL_B][e], I[I_CAL_V][e], nxt[e] = b, v, -1
    if tail[t] >= 0:
        nxt[tail[t]] = e
    else:
        head[t] = e
    tail[t] = e


@njit
def due(st, bu, bi, bf, cf, I):
    """ExpectedNextUse._due: the candidates whose checkpoint falls in a step up to the one about to start, their
    keys refreshed, listed in I[I_DUE][:st[N_DUE]] in the calendar's order (steps ascending, each in filing order).
    Every step since the last call is walked: the Python loop's sorted keys for a long gap are the same steps (an
    entry is always filed after the last call's step)."""
    now = st[P_STEP] + 1
    head, tail = I[I_CAL_HEAD], I[I_CAL_TAIL]
    st[N_DUE] = 0
    for t in range(st[DUE_LAST] + 1, min(now, head.shape[0] - 1) + 1):
        e = head[t]
        head[t] = -1
        tail[t] = -1
        while e >= 0:  # (a refresh files at now + 1 or later: never into the list being walked)
            nxt = I[I_CAL_NEXT]
            following, b, v = nxt[e], I[I_CAL_B][e], I[I_CAL_V][e]
            nxt[e] = st[CAL_FREE]
            st[CAL_FREE] = e
            if bi[VER, b] == v and not bu[LAYOUT, b]:
                refresh(st, cf, bi, bf, I, b, now)
                append(I, I_DUE, st, N_DUE, b)
            e = following
    st[DUE_LAST] = now


@njit
def stale(st, bu, bi, bf, ci, cf, rq, rl, I):
    """ExpectedNextUse.stale, in place: returns (m, k), the lapsed blocks being I[I_UNREAD][:m] then
    I[I_RAISED][:k], then (`young`) the refreshed ones I[I_DUE][:st[N_DUE]] (the simulator files them again after the
    whole call, as it does with the returned list)."""
    un = I[I_UNREAD]
    m = 0
    for j in range(st[UNREAD_N]):
        b = un[j]
        if bu[UNREAD, b]:
            un[m] = b
            m += 1
    for j in range(m):
        bu[UNREAD, un[j]] = 0
    st[UNREAD_N] = 0
    k = 0
    if ci[RAISES] and st[P_STEP_SET]:
        raised = I[I_RAISED]
        for j in range(st[N_RAISED]):
            b = raised[j]
            if bi[BOOST, b] == st[RAISED_STEP]:
                bi[BOOST, b] = ABSENT
                raised[k] = b
                k += 1
        st[N_RAISED] = 0
        st[RAISED_STEP] = st[P_STEP]
        st[BATCH_EPOCH] += 1
        for j in range(st[N_ENT]):
            rq[BATCH_MARK, rl[ENT_LIST, j]] = st[BATCH_EPOCH]
        for j in range(st[N_DEC]):
            r = rl[DEC_LIST, j]
            if rq[LEAVE_MARK, r] != st[EPOCH]:
                rq[BATCH_MARK, r] = st[BATCH_EPOCH]
        st[DONE_EPOCH] += 1
    if ci[YOUNG_ON] and st[P_STEP_SET]:
        due(st, bu, bi, bf, cf, I)
    return m, k


@njit
def raise_key(st, ci, bu, bi, rq, I, b):
    """ExpectedNextUse.raise_key."""
    ri = bi[REQI, b]
    if bu[LAYOUT, b] or rq[BATCH_MARK, ri] != st[BATCH_EPOCH] or rq[DONE_MARK, ri] == st[DONE_EPOCH] or \
            bi[BOOST, b] >= st[RAISED_STEP] or st[N_RAISED] >= ci[RAISE_CAP]:
        return False
    bi[BOOST, b] = st[RAISED_STEP]
    I[I_RAISED][st[N_RAISED]] = b
    st[N_RAISED] += 1
    return True


@njit
def choose_recompute(ci, bu, b, read_us, write_us, recompute_us):
    """ExpectedNextUse.choose_recompute."""
    if ci[SPILL_REUSED] and bu[HHSEEN, b]:
        return False
    return recompute_us < write_us + read_us


@njit
def _lt(k1, b1, k2, b2):
    return k1 < k2 or (k1 == k2 and b1 < b2)


@njit
def _sp_push(st, rq, F, I, ri, k, b):
    """heappush(spilled[r], (k, b)), the segment moved to the pool's end (or the pool packed) when full."""
    n = rq[SP_LEN, ri]
    if n == rq[SP_CAP, ri]:
        cap = max(8, 2 * n)
        pk, pb = F[F_POOL_K], I[I_POOL_B]
        if st[POOL_TOP] + cap > pk.shape[0]:
            total = cap
            for r in range(rq.shape[1]):
                if rq[SP_EXISTS, r] and r != ri:
                    total += rq[SP_CAP, r]
            size = max(POOL_START, 2 * total)
            nk = np.zeros(size, dtype=np.float64)
            nb = np.zeros(size, dtype=np.int64)
            top = 0
            for r in range(rq.shape[1]):
                if rq[SP_EXISTS, r] and r != ri and rq[SP_CAP, r] > 0:
                    s0 = rq[SP_START, r]
                    ln = rq[SP_LEN, r]
                    nk[top:top + ln] = pk[s0:s0 + ln]
                    nb[top:top + ln] = pb[s0:s0 + ln]
                    rq[SP_START, r] = top
                    top += rq[SP_CAP, r]
            s0 = rq[SP_START, ri]
            nk[top:top + n] = pk[s0:s0 + n]
            nb[top:top + n] = pb[s0:s0 + n]
            pk, pb = nk, nb
            F[F_POOL_K] = pk
            I[I_POOL_B] = pb
        else:
            s0 = rq[SP_START, ri]
            top = st[POOL_TOP]
            pk[top:top + n] = pk[s0:s0 + n]
            pb[top:top + n] = pb[s0:s0 + n]
        rq[SP_START, ri] = top
        rq[SP_CAP, ri] = cap
        st[POOL_TOP] = top + cap
    pk, pb = F[F_POOL_K], I[I_POOL_B]
    base = rq[SP_START, ri]
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if not _lt(k, b, pk[base + parent], pb[base + parent]):
            break
        pk[base + i], pb[base + i] = pk[base + parent], pb[base + parent]
        i = parent
    pk[base + i], pb[base + i] = k, b
    rq[SP_LEN, ri] = n + 1


@njit
def _sp_pop(rq, F, I, ri):
    """heappop(spilled[r]) (the segment is not empty)."""
    pk, pb = F[F_POOL_K], I[I_POOL_B]
    base = rq[SP_START, ri]
    k0, b0 = pk[base], pb[base]
    n = rq[SP_LEN, ri] - 1
    rq[SP_LEN, ri] = n
    if n > 0:
        k, b = pk[base + n], pb[base + n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _lt(pk[base + c + 1], pb[base + c + 1], pk[base + c], pb[base + c]):
                c += 1
            if _lt(pk[base + c], pb[base + c], k, b):
                pk[base + i], pb[base + i] = pk[base + c], pb[base + c]
                i = c
            else:
                break
        pk[base + i], pb[base + i] = k, b
    return k0, b0


@njit
def on_evicted(st, bu, bi, bf, rq, F, I, b):
    """ExpectedNextUse.on_evicted: a candidate joins its request's spilled heap."""
    if bu[LAYOUT, b]:
        return
    st[EVICTIONS] += 1
    bi[EVICTED_AT, b] = st[EVICTIONS]
    ri = bi[REQI, b]
    if not rq[SP_EXISTS, ri]:
        rq[SP_EXISTS, ri] = 1
        rq[SP_LEN, ri] = 0
    _sp_push(st, rq, F, I, ri, -bf[SCORE, b] - bf[LOGW, b], b)


@njit
def _held(st, F, I, k, b, ri):
    hk = F[F_HELD_K]
    if st[HELD_N] == hk.shape[0]:
        F[F_HELD_K] = grown_f(hk, st[HELD_N] + 1)
        I[I_HELD_B] = grown(I[I_HELD_B], st[HELD_N] + 1)
        I[I_HELD_R] = grown(I[I_HELD_R], st[HELD_N] + 1)
    n = st[HELD_N]
    F[F_HELD_K][n] = k
    I[I_HELD_B][n] = b
    I[I_HELD_R][n] = ri
    st[HELD_N] = n + 1


@njit
def top(st, bu, bi, bf, rq, F, I, ri):
    """ExpectedNextUse._top: (found, key, block) of request ri's best candidate nominated at the step's end."""
    while rq[SP_EXISTS, ri] and rq[SP_LEN, ri] > 0:
        k, b = _sp_pop(rq, F, I, ri)
        if bu[LOC, b] != SLOW_LOC or -k != bf[SCORE, b] + bf[LOGW, b]:
            if bu[LOC, b] == SLOW_LOC:
                _sp_push(st, rq, F, I, ri, -bf[SCORE, b] - bf[LOGW, b], b)
            continue
        _held(st, F, I, k, b, ri)
        if bi[EVICTED_AT, b] <= st[MARK]:
            return True, k, b
    return False, 0.0, -1


@njit
def lookahead_start(st, rq, rl, F, I):
    """ExpectedNextUse.lookahead's set-up: held candidates filed again, the mark, the next batch's requests
    (entering | decoded - leaving) in rl[NXT][:n]; returns n."""
    hk, hb, hr = F[F_HELD_K], I[I_HELD_B], I[I_HELD_R]
    for j in range(st[HELD_N]):
        r = hr[j]
        if rq[SP_EXISTS, r]:
            _sp_push(st, rq, F, I, r, hk[j], hb[j])
    st[HELD_N] = 0
    st[MARK] = st[EVICTIONS]
    st[NOM_EPOCH] += 1
    n = 0
    for j in range(st[N_ENT]):
        r = rl[ENT_LIST, j]
        if rq[NOM_MARK, r] != st[NOM_EPOCH]:
            rq[NOM_MARK, r] = st[NOM_EPOCH]
            rl[NXT, n] = r
            n += 1
    for j in range(st[N_DEC]):
        r = rl[DEC_LIST, j]
        if rq[LEAVE_MARK, r] != st[EPOCH] and rq[NOM_MARK, r] != st[NOM_EPOCH]:
            rq[NOM_MARK, r] = st[NOM_EPOCH]
            rl[NXT, n] = r
            n += 1
    return n


@njit
def top_push(tk, rl, n, k, b, r):
    """Push (k, b, r) on the nomination heap of n entries (tk keys; rl[TOP_B], rl[TOP_R])."""
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if not _lt(k, b, tk[parent], rl[TOP_B, parent]):
            break
        tk[i], rl[TOP_B, i], rl[TOP_R, i] = tk[parent], rl[TOP_B, parent], rl[TOP_R, parent]
        i = parent
    tk[i], rl[TOP_B, i], rl[TOP_R, i] = k, b, r
    return n + 1


@njit
def top_pop(tk, rl, n):
    """Pop the nomination heap's least (key, block): returns (n - 1, block, request)."""
    b0, r0 = rl[TOP_B, 0], rl[TOP_R, 0]
    n -= 1
    if n > 0:
        k, b, r = tk[n], rl[TOP_B, n], rl[TOP_R, n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _lt(tk[c + 1], rl[TOP_B, c + 1], tk[c], rl[TOP_B, c]):
                c += 1
            if _lt(tk[c], rl[TOP_B, c], k, b):
                tk[i], rl[TOP_B, i], rl[TOP_R, i] = tk[c], rl[TOP_B, c], rl[TOP_R, c]
                i = c
            else:
                break
        tk[i], rl[TOP_B, i], rl[TOP_R, i] = k, b, r
    return n, b0, r0

