"""ExpectedNextUse: what it keeps and evicts, from what the engine has announced and what it has observed."""
from __future__ import annotations

import numpy as np

from kv_policy import codes
from kv_policy.registry import make_policy
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel
from kv_policy.trace import Trace

SZ = 4096
ALLOC, ACCESS, HINT = codes.ALLOC, codes.ACCESS, codes.HINT
W, PS, DC = codes.WARM, codes.PREFETCH_SOON, codes.DECODE_CRITICAL
TWO = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 2 * SZ)


def make(events, n_blocks, prio=None, request=None) -> Trace:
    step, kind, block, crit, cls = (list(x) for x in zip(*events))
    t = Trace(np.array(step, dtype=np.int64), np.array(kind, dtype=np.uint8), np.array(block, dtype=np.int32),
              np.array(crit, dtype=bool), np.array(cls, dtype=np.uint8), np.full(n_blocks, SZ, dtype=np.int64),
              np.array(request or [0] * n_blocks, dtype=np.int32), np.array(prio or [50] * n_blocks, dtype=np.uint8),
              np.full(n_blocks, 100_000.0))
    t.validate()
    return t


def evicted(events, n_blocks, name="ExpectedNextUse", **kw) -> list[int]:
    """Blocks spilled, in order."""
    r = simulate(make(events, n_blocks, **kw), make_policy(name, free_target=0.0) if name == "ExpectedNextUse"
                 else make_policy(name), TWO, record=True)
    return [b for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (3, 4)]


def prefill(blocks, step=0):
    return [(step, ALLOC, b, False, W) for b in blocks] + [(step, ACCESS, b, False, 0) for b in blocks]


def test_a_block_announced_for_the_next_batch_outlives_a_heavy_hitter_candidate() -> None:
    # A is announced (sink/window of a request in the next batch); B is an unannounced older block that was just
    # read, which is all LRU looks at
    ev = prefill([0, 1]) + [(1, HINT, 0, True, PS), (1, ACCESS, 1, True, 0), (2, ALLOC, 2, False, W)]
    assert evicted(ev, 3) == [1]
    assert evicted(ev, 3, "LRU") == [0]


def test_observed_reuse_keeps_the_often_read_block() -> None:
    # both are heavy-hitter candidates; A was read three times, B once and more recently
    ev = prefill([0, 1]) + [(1, ACCESS, 0, True, 0), (2, ACCESS, 0, True, 0), (3, ACCESS, 0, True, 0),
                            (4, ACCESS, 1, True, 0), (5, ALLOC, 2, False, W)]
    assert evicted(ev, 3) == [1]
    assert evicted(ev, 3, "LRU") == [0]


def test_leaving_the_batch_keeps_the_window_above_blocks_that_slid_out_of_it() -> None:
    # A and B are a request's window blocks (allocated decode-critical); B slides out of the window (a warm hint
    # that is not a batch change), then the request leaves the batch (A hinted warm as a batch change)
    ev = [(0, ALLOC, 0, False, DC), (0, ALLOC, 1, False, DC), (1, HINT, 1, False, W), (1, HINT, 0, True, W),
          (2, ALLOC, 2, False, W)]
    assert evicted(ev, 3) == [1]


def test_priority_knob_protects_the_high_band() -> None:
    # A (priority 90) was read once, B (priority 10) twice: reuse alone evicts A, the knob evicts B
    ev = prefill([0, 1]) + [(1, ACCESS, 1, True, 0), (2, ACCESS, 1, True, 0), (3, ACCESS, 0, True, 0),
                            (4, ALLOC, 2, False, W)]
    prio = [90, 10, 50]
    assert evicted(ev, 3, prio=prio) == [0]
    r = simulate(make(ev, 3, prio=prio), make_policy("ExpectedNextUse", priority_weight=3.0, free_target=0.0),
                 TWO, record=True)
    assert [b for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (3, 4)] == [1]


def test_deadline_aware_weighs_reuse_it_does_not_override_it() -> None:
    # A belongs to a tight high-priority request but was read once; B (loose, low priority) is read every step:
    # the old class/priority-first ordering kept A, reuse now keeps B
    ev = prefill([0, 1]) + [(1, ACCESS, 0, True, 0)] + [(s, ACCESS, 1, True, 0) for s in range(2, 300)] \
        + [(300, ALLOC, 2, False, W)]
    assert evicted(ev, 3, "DeadlineAware", prio=[95, 10, 50]) == [0]


def test_a_shared_block_read_by_more_prefills_is_worth_more() -> None:
    # A and B are shared documents (no owning request), both read by one request's prefill; A then joins a
    # second request's prefill
    ev = [(0, ALLOC, 0, False, W), (0, ALLOC, 1, False, W), (1, ALLOC, 3, False, W), (1, ACCESS, 0, False, 0),
          (1, ACCESS, 1, False, 0), (1, ACCESS, 3, False, 0), (2, ALLOC, 4, False, W), (2, ACCESS, 0, False, 0),
          (2, ACCESS, 4, False, 0)]
    t = make(ev, 5, request=[-1, -2, 0, 1, 2])
    pol = make_policy("ExpectedNextUse")
    pol.bind(t)
    for i, (step, kind, b, crit, cls) in enumerate(ev):
        pol.on_event(i, kind, b, step, crit, cls)
    assert pol.key(0, len(ev), 2, W) > pol.key(1, len(ev), 2, W)


# Look-ahead: request 0 owns L (its window block) and H (a heavy-hitter candidate), request 1 owns X and Y.
# Fast tier of 3. H and X are read once each (X a step later, so it is worth a little more); Y's allocation
# spills H. At step 4 request 0 is announced for the next batch (L hinted prefetch-soon) and request 1 out of it
# (Y hinted warm): at the end of that step
# the look-ahead reads H back, evicting X (H's rate for a request sure to decode next step, rate / p, now exceeds
# X's), so step 5's read of H hits. Without the look-ahead it misses.
L_, H_, X_, Y_ = range(4)
LOOK = [(0, ALLOC, L_, False, DC), (0, ALLOC, H_, False, W), (0, ALLOC, X_, False, W),
        (1, ACCESS, L_, True, 0), (1, ACCESS, H_, True, 0), (2, ACCESS, X_, True, 0),
        (3, ALLOC, Y_, False, DC), (4, ACCESS, Y_, True, 0), (4, HINT, L_, True, PS), (4, HINT, Y_, True, W),
        (5, ACCESS, L_, True, 0), (5, ACCESS, H_, True, 0)]
THREE = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 3 * SZ)


def _look(lookahead: float):
    pol = make_policy("ExpectedNextUse", free_target=0.0, lookahead=lookahead)
    return pol, simulate(make(LOOK, 4, request=[0, 0, 1, 1]), pol, THREE, record=True)


def test_lookahead_fetches_a_spilled_candidate_of_the_announced_batch() -> None:
    from kv_policy.simulator import OP_PREFETCH, OP_SPILL_SYNC

    pol, r = _look(1.0)
    ops = list(zip(r.ops["step"].tolist(), r.ops["op"].tolist(), r.ops["block"].tolist()))
    assert (3, OP_SPILL_SYNC, H_) in ops                       # Y's allocation spilled H (the lowest rate)
    assert (4, OP_PREFETCH, H_) in ops                         # fetched at the end of the announcing step
    assert (4, OP_SPILL_SYNC, X_) not in ops and r.spills == 2  # X went in the background, not on a step
    assert (r.prefetches, r.prefetch_used, r.dc_misses) == (1, 1, 0)
    _, off = _look(0.0)
    assert (off.prefetches, off.dc_misses) == (0, 1)


def test_the_lookahead_value_lasts_one_step() -> None:
    """H's keep-value is raised by 1/p (its request decodes next step) for that step only, then falls back to its
    observed rate: a stale raise would keep an unread block over better ones."""
    import math

    pol, _ = _look(1.0)
    base = pol.score[H_] + pol.logw[H_]
    pol.boost[H_] = 4                                          # as after step 4's look-ahead, before H's read
    assert pol.key(H_, 0, 5, W) == base - math.log(pol.p)
    assert pol.key(H_, 0, 6, W) == base


def test_a_recompute_ok_block_read_as_a_heavy_hitter_is_spilled_not_dropped() -> None:
    # A and B are prompt blocks (recompute-ok); A is read by a decode as a heavy hitter, B never. Recompute is
    # cheap, so a never-read block is dropped; a re-read one keeps a slow-tier copy the look-ahead can fetch
    ev = [(0, ALLOC, 0, False, codes.RECOMPUTE_OK), (0, ALLOC, 1, False, codes.RECOMPUTE_OK),
          (1, ACCESS, 0, True, 0), (2, ALLOC, 2, False, W), (2, ACCESS, 2, True, 0), (3, ACCESS, 2, True, 0),
          (4, ALLOC, 3, False, W)]
    tiers = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 2 * SZ, recompute_us_per_byte=1.0 / SZ)
    r = simulate(make(ev, 4), make_policy("ExpectedNextUse", free_target=0.0), tiers, record=True)
    from kv_policy.simulator import OP_DROP, OP_SPILL_SYNC
    moves = [(op, b) for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (OP_DROP, OP_SPILL_SYNC)]
    assert moves == [(OP_DROP, 1), (OP_SPILL_SYNC, 0)]
    r0 = simulate(make(ev, 4), make_policy("ExpectedNextUse", free_target=0.0, spill_reused=0.0), tiers)
    assert (r0.drops, r0.spills) == (2, 0)


# Queue hints: D (block 40) is a shared document block read by request 1's prefill (with its own block 41) at
# step 0; request 0's prefill reads its 40 prompt blocks (0-39) at step 1000, block 41 is read by a decode at step
# 1500. At step 2000 the engine announces that a waiting request will read D (prefetch-soon, not a batch change),
# and Y's allocation needs room (fast tier of 42). By reuse alone D is the lowest (read once, long ago); with the
# queue hint it is worth at least the queue rate, so another block goes.
D_, Y2 = 40, 42
QUEUE = [(0, ALLOC, D_, False, W), (0, ALLOC, 41, False, W), (0, ACCESS, D_, False, 0), (0, ACCESS, 41, False, 0)] \
    + [(1000, ALLOC, b, False, W) for b in range(40)] + [(1000, ACCESS, b, False, 0) for b in range(40)] \
    + [(1500, ACCESS, 41, True, 0), (2000, HINT, D_, False, PS), (2000, ALLOC, Y2, False, DC)]
QREQ = [0] * 40 + [-1, 1, 1]
FORTY_TWO = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 42 * SZ)


def _queue_evicted(name: str = "ExpectedNextUse", **kw) -> list[int]:
    pol = make_policy(name, free_target=0.0, **kw) if name == "ExpectedNextUse" else make_policy(name)
    r = simulate(make(QUEUE, 43, request=QREQ), pol, FORTY_TWO, record=True)
    return [b for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (3, 4)]


def test_a_document_a_waiting_request_will_read_outlives_a_heavy_hitter_candidate() -> None:
    assert _queue_evicted(queue_rate=0.0) == [D_]
    gone = _queue_evicted()
    assert len(gone) == 1 and gone[0] != D_
    assert _queue_evicted("LRU") == [D_]


def test_the_lookahead_nominates_a_spilled_document_a_waiting_request_will_read() -> None:
    # the same, but D was spilled before the hint (Y allocated first): the look-ahead names it every step until
    # it is back; once the request is admitted (D hinted warm) it is no longer named
    ev = QUEUE[:-2] + [(1999, ALLOC, Y2, False, DC), (2000, HINT, D_, False, PS)]
    t = make(ev, 43, request=QREQ)
    pol = make_policy("ExpectedNextUse", free_target=0.0)
    pol.bind(t)
    for i, (step, kind, b, crit, cls) in enumerate(ev):
        pol.on_event(i, kind, b, step, crit, cls)
    loc = bytearray([codes.LOC_FAST] * 43)
    loc[D_] = codes.LOC_SLOW
    assert D_ in pol.lookahead(2000, loc) and D_ in pol.lookahead(2001, loc)
    loc[D_] = codes.LOC_FAST
    assert D_ not in pol.lookahead(2002, loc)       # resident: nothing to fetch
    loc[D_] = codes.LOC_SLOW
    pol.on_event(len(ev), HINT, D_, 2003, False, W)  # the waiting request was admitted
    assert D_ not in pol.lookahead(2003, loc)


def test_a_document_block_is_not_evicted_by_its_own_admission() -> None:
    # B is a window block of a request out of the next batch (kept above every heavy-hitter candidate); a prefill
    # allocates document blocks X then Y (fast tier of 2: Y's allocation needs room) and reads both. Keeping X
    # (read in this very step) beats keeping B; with fresh_first=0 X ranks as an unread candidate below B, so X
    # is spilled and then missed.
    ev = [(0, ALLOC, 0, False, DC), (1, HINT, 0, True, W),
          (3, ALLOC, 1, False, W), (3, ALLOC, 2, False, W), (3, ACCESS, 1, False, 0), (3, ACCESS, 2, False, 0)]
    req = [0, -1, -1]
    assert evicted(ev, 3, request=req) == [0]
    r = simulate(make(ev, 3, request=req), make_policy("ExpectedNextUse", free_target=0.0, fresh_first=0.0),
                 TWO, record=True)
    assert [b for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (3, 4)][0] == 1
    assert r.misses >= 1
    on = simulate(make(ev, 3, request=req), make_policy("ExpectedNextUse", free_target=0.0), TWO)
    assert on.misses == 0


def test_a_small_prompt_is_protected_like_a_document_a_huge_one_is_not() -> None:
    # the same admission with X and Y as request 1's own prompt blocks: a prompt whose blocks are under
    # `fresh_share` of the live blocks is kept until its prefill reads it; with the share at 0 X goes first
    ev = [(0, ALLOC, 0, False, DC), (1, HINT, 0, True, W), (3, ALLOC, 1, False, codes.RECOMPUTE_OK),
          (3, ALLOC, 2, False, codes.RECOMPUTE_OK), (3, ACCESS, 1, False, 0), (3, ACCESS, 2, False, 0)]
    assert evicted(ev, 3, request=[0, 1, 1]) == [0]
    tiers = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 2 * SZ, recompute_us_per_byte=1.0 / SZ)
    r = simulate(make(ev, 3, request=[0, 1, 1]), make_policy("ExpectedNextUse", free_target=0.0, fresh_share=0.0),
                 tiers, record=True)
    from kv_policy.simulator import OP_DROP
    assert (OP_DROP, 1) in list(zip(r.ops["op"].tolist(), r.ops["block"].tolist())) and r.recomputes >= 1


def test_the_prefill_keep_value_lapses_with_its_step() -> None:
    # document block X is allocated but not read in its step: from the next step on it ranks like any unread block;
    # a request's own prompt block past `fresh_share` of the live blocks never gets the raise
    ev = [(0, ALLOC, 0, False, W), (0, ACCESS, 0, False, 0), (1, ALLOC, 1, False, W), (1, ALLOC, 2, False, W)]
    t = make(ev, 3, request=[0, -1, 1])
    pol = make_policy("ExpectedNextUse")
    pol.bind(t)
    for i, (step, kind, b, crit, cls) in enumerate(ev):
        pol.on_event(i, kind, b, step, crit, cls)
    top = pol.key(1, 2, 1, W)
    assert top > pol.key(2, 3, 1, W) + 100
    assert pol.stale() == [1]
    assert pol.key(1, 2, 2, W) < top - 100


# The batch raise: request 0 (window L, candidate H) is announced for step 3 at the end of step 2; request 1 (window
# M, candidate X) decoded at step 2 and was announced out. X was born and read a step after H (each read one step
# after its birth: the same exposure term under `young`), so by reuse alone X is worth a little more. Y's allocation
# at step 3 needs room before request 0 has decoded: H's request decodes in this step for sure, so H is worth
# rate / p and X goes.
M_, Y3 = 3, 4
RAISE = [(0, ALLOC, L_, False, DC), (0, ALLOC, H_, False, W), (0, ALLOC, M_, False, DC), (1, ALLOC, X_, False, W),
         (1, ACCESS, L_, True, 0), (1, ACCESS, H_, True, 0), (2, ACCESS, M_, True, 0), (2, ACCESS, X_, True, 0),
         (2, HINT, L_, True, PS), (2, HINT, M_, True, W), (3, ALLOC, Y3, False, DC)]
REQ5 = [0, 0, 1, 1, 1]
FOUR = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 4 * SZ)


def _raise_spills(**kw) -> list[int]:
    pol = make_policy("ExpectedNextUse", free_target=0.0, **kw)
    r = simulate(make(RAISE, 5, request=REQ5), pol, FOUR, record=True)
    return [b for op, b in zip(r.ops["op"].tolist(), r.ops["block"].tolist()) if op in (3, 4)]


def test_a_candidate_of_a_request_announced_for_the_step_outlives_a_slightly_better_one() -> None:
    assert _raise_spills() == [X_]
    assert _raise_spills(batch_raise=0.0) == [H_]


def test_the_batch_raise_ends_with_its_request_s_decode_and_lapses_with_the_step() -> None:
    import math

    t = make(RAISE[:-1], 5, request=REQ5)
    pol = make_policy("ExpectedNextUse")
    pol.bind(t)
    for i, (step, kind, b, crit, cls) in enumerate(RAISE[:-1]):
        pol.on_event(i, kind, b, step, crit, cls)
    base = pol.key(H_, 0, 3, W)
    assert pol.stale() == [] and pol.raise_key(H_) and not pol.raise_key(H_)  # raised once
    assert pol.key(H_, 0, 3, W) == base - math.log(pol.p)
    assert not pol.raise_key(X_)                                            # request 1 is not announced
    assert pol.stale() == [H_] and pol.key(H_, 0, 4, W) == base             # the step ended: back to its rate
    # a request that has decoded in the step is not raised (its reads of the step are done)
    pol.on_event(10, ACCESS, L_, 4, True, 0)
    pol.batch_now = {0}
    assert not pol.raise_key(H_)


def test_the_batch_raise_is_capped_per_step() -> None:
    """At most raise_cap blocks are raised in one step (the bound on a step's extra cost); the next step may
    raise again."""
    t = make(RAISE[:-1], 5, request=REQ5)
    pol = make_policy("ExpectedNextUse", raise_cap=0)
    pol.bind(t)
    for i, (step, kind, b, crit, cls) in enumerate(RAISE[:-1]):
        pol.on_event(i, kind, b, step, crit, cls)
    pol.stale()
    assert not pol.raise_key(H_) and pol.raised == []  # the cap is reached before the first raise
    pol.raise_cap = 1
    assert pol.raise_key(H_) and pol.raised == [H_]      # one raise fits this step
    assert pol.stale() == [H_]                           # the step ends: the raise lapses, the count restarts
    assert pol.raise_key(H_)
