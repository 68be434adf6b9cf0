"""ExpectedNextUse's and DeadlineAware's compiled loop (kv_policy/simulator_enu.py) makes the Python reference's
decisions: every count, every step latency and SLO record and the whole recorded operation log (hits, misses,
spills, drops, prefetches, evictions in order), on hand-built traces, on generated traces of every profile and on
slices of the shipped Mooncake slice, at several capacities and seeds."""
from __future__ import annotations

import numpy as np
import pytest

from kv_policy import codes, simulator_enu, simulator_fast
from kv_policy.compare import Capacity
from kv_policy.expected_next_use import ExpectedNextUse
from kv_policy.generator import generate
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.profiles import PROFILES, get_profile
from kv_policy.registry import make_policy
from kv_policy.simulator import OP_NAMES, SimResult, band_of, compiled, simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel, for_trace
from kv_policy.trace import Trace
from tests.policy.conftest import same_run as same

POLICIES = ("ExpectedNextUse", "DeadlineAware")


def both(t: Trace, policy: str, tm: TierModel, **params: float) -> tuple[SimResult, SimResult]:
    """(compiled, reference) runs of one policy, operation logs recorded."""
    assert simulator_enu.eligible(make_policy(policy, **params), t)
    fast = simulate(t, make_policy(policy, **params), tm, record=True)
    ref = simulate(t, make_policy(policy, **params), tm, record=True, fast=False)
    return fast, ref


def hand_trace(events: list[tuple[int, int, int, bool, int]], n_blocks: int, request: list[int]) -> Trace:
    """A trace from (step, kind, block, critical, class) tuples; 1 KiB blocks, priority 50, 50 ms deadlines."""
    step, kind, block, crit, cls = (np.asarray(c) for c in zip(*events))
    return Trace(step.astype(np.int64), kind.astype(np.uint8), block.astype(np.int32), crit.astype(bool),
                 cls.astype(np.uint8), np.full(n_blocks, 1024, dtype=np.int64), np.asarray(request, dtype=np.int32),
                 np.full(n_blocks, 50, dtype=np.uint8), np.full(n_blocks, 50_000.0))


A, X, H, F = codes.ALLOC, codes.ACCESS, codes.HINT, codes.FREE
DC, COLD, WARM = codes.DECODE_CRITICAL, codes.COLD_SPILLABLE, codes.WARM


def ops_of(r: SimResult) -> list[tuple[int, str, int]]:
    return [(int(s), OP_NAMES[int(o)], int(b)) for s, o, b in zip(r.ops["step"], r.ops["op"], r.ops["block"])]


def test_hand_trace_cold_block_goes_first_and_comes_back_by_a_miss() -> None:
    """Two blocks fit. Request 0's window block 0 is read every step; block 1 is announced cold-spillable, so the
    allocation of block 2 spills it (not block 0), and reading block 1 again is a miss that spills block 2 (a warm
    heavy-hitter candidate never read: below the window block)."""
    ev = [(0, A, 0, False, DC), (0, A, 1, False, WARM), (0, X, 0, True, 0), (0, X, 1, True, 0),
          (1, H, 1, False, COLD), (1, X, 0, True, 0), (1, A, 2, False, WARM), (2, X, 0, True, 0),
          (2, X, 1, True, 0), (3, X, 0, True, 0), (3, F, 0, False, 0), (3, F, 1, False, 0), (3, F, 2, False, 0)]
    t = hand_trace(ev, 3, [0, 0, 0])
    tm = TierModel(DEFAULT_FAST, DEFAULT_SLOW, 2 * 1024)
    for policy in POLICIES:
        fast, ref = both(t, policy, tm, lookahead=0, free_target=0)
        same(fast, ref)
        assert ops_of(fast) == [(0, "alloc", 0), (0, "alloc", 1), (0, "hit", 0), (0, "hit", 1),
                                (1, "hit", 0), (1, "spill-sync", 1), (1, "alloc", 2), (2, "hit", 0),
                                (2, "spill-sync", 2), (2, "miss", 1), (3, "hit", 0),
                                (3, "free", 0), (3, "free", 1), (3, "free", 2)]
        assert (fast.dc_accesses, fast.dc_misses, fast.spills) == (6, 1, 2)


def test_hand_trace_prefetch_on_hint_and_look_ahead_as_the_reference() -> None:
    """Blocks spilled then announced prefetch-soon are read back in the background (an unlimited I/O budget), and
    the look-ahead fetches a next-batch request's spilled candidate: the same prefetches, in the same order."""
    ev = [(0, A, 0, False, DC), (0, A, 1, False, WARM), (0, A, 2, False, WARM), (0, X, 0, True, 0),
          (0, X, 1, True, 0), (1, A, 3, False, DC), (1, X, 3, True, 0), (1, H, 0, True, codes.PREFETCH_SOON),
          (2, X, 0, True, 0), (2, H, 1, False, codes.PREFETCH_SOON), (3, X, 1, True, 0), (3, X, 2, True, 0),
          (4, X, 0, True, 0), (4, X, 1, True, 0), (5, F, 0, False, 0), (5, F, 1, False, 0), (5, F, 2, False, 0),
          (5, F, 3, False, 0)]
    t = hand_trace(ev, 4, [0, 0, 0, 1])
    for cap in (2, 3):
        tm = TierModel(DEFAULT_FAST, DEFAULT_SLOW, cap * 1024)
        for policy in POLICIES:
            fast, ref = both(t, policy, tm)
            same(fast, ref)
            assert fast.spills > 0


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("policy", POLICIES)
def test_compiled_loop_decides_as_the_reference_on_generated_traces(profile: str, policy: str) -> None:
    for seed, (fraction, slow_fraction) in ((3, (0.3, 0.0)), (5, (0.5, 0.6)), (7, (0.15, 0.0))):
        t = generate(get_profile(profile), seed, 30_000)
        tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, max(int(t.block_size.max()), int(t.peak_live_bytes() * fraction)),
                       int(t.peak_live_bytes() * slow_fraction))
        fast, ref = both(t, policy, tm)
        assert fast.misses > 0 and fast.spills + fast.drops > 0
        same(fast, ref)


def test_compiled_loop_decides_as_the_reference_with_every_parameter_changed() -> None:
    """The shipped defaults and each switch of the policy's parameters (the compiled loop reads them all), `young`
    off (the previous key, where `prior` counts) and at another weight and decay."""
    t = generate(get_profile("rag_mixed_priority"), 2, 30_000)
    tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    for params in ({"priority_weight": 2.25}, {"lookahead": 0}, {"batch_raise": 0}, {"free_target": 0.05},
                   {"spill_reused": 0, "queue_rate": 0}, {"fresh_first": 0}, {"raise_cap": 3}, {"young": 0.0},
                   {"young": 0.0, "prior": 0.5}, {"young": 0.3, "decay": 0.02}):
        fast, ref = both(t, "ExpectedNextUse", tm, **params)
        same(fast, ref)


@pytest.mark.parametrize("young", (None, 0.0))
@pytest.mark.parametrize("policy", POLICIES)
def test_compiled_loop_decides_as_the_reference_on_the_shipped_mooncake_slice(policy: str, young: float | None) -> None:
    """As shipped (`young` 0.05; seeds 0 and 1) and with the previous key (young 0; seed 2): three seeds' priority
    draws in all, each at three capacities (the Python reference takes most of this test's time)."""
    params = {} if young is None else {"young": young}
    for seed in ((0, 1) if young is None else (2,)):
        t = load_trace(TraceOptions("mooncake-slice", max_requests=40), seed=seed)
        for fraction in (0.05, 0.1, 0.25):
            tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, Capacity(fraction).for_trace(t))
            fast, ref = both(t, policy, tm, **params)
            assert fast.dc_misses > 0
            same(fast, ref)


def test_lists_that_start_at_8_entries_grow_and_decide_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every growable list, the spilled-candidate pool and the heap start at 8 entries: regrown, packed and shed
    thousands of times, the decisions are still the reference's; with no log recorded nothing is sized by the
    number of events (the heap by the most blocks the fast tier holds)."""
    t = load_trace(TraceOptions("mooncake-slice", max_requests=40), seed=4)
    tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, Capacity(0.1).for_trace(t), 0)
    ref = simulate(t, make_policy("ExpectedNextUse"), tm, record=True, fast=False)
    monkeypatch.setattr(simulator_enu, "START_CAP", 8)
    small = simulate(t, make_policy("ExpectedNextUse"), tm, record=True)
    same(small, ref)
    held = simulator_enu.heap_size(t, tm.fast_capacity, 8)
    assert held < len(t) // 10
    pol = make_policy("ExpectedNextUse")
    pol.bind(t)
    lo = min(0, int(t.block_request.min()))
    *_, heap, floats, ints = simulator_enu._state(pol, t, lo, int(t.block_request.max()) - lo + 1,
                                                  tm.fast_capacity, False, 8)
    assert heap[0].size == held and all(a.size < len(t) // 10 for a in (*floats, *ints))


def test_a_subclass_keeps_the_python_loop() -> None:
    """A new policy built on ExpectedNextUse may change any hook: only the two shipped classes are compiled."""

    class Variant(ExpectedNextUse):
        name = "Variant"

    t = generate(get_profile("balanced"), 0, 2_000)
    assert simulator_enu.eligible(make_policy("ExpectedNextUse"), t)
    assert simulator_enu.eligible(make_policy("DeadlineAware"), t)
    assert not simulator_enu.eligible(Variant(), t)
    assert not simulator_enu.eligible(make_policy("LRU"), t)


def test_simulate_hands_each_policy_to_its_loop() -> None:
    """`simulate` runs LRU in simulator_fast's loop, the two ExpectedNextUse classes in simulator_enu's and a
    subclass in the Python loop: its result is the chosen loop's, decision for decision."""

    class Variant(ExpectedNextUse):
        name = "Variant"

    t = generate(get_profile("balanced"), 0, 3_000)
    tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    for name, loop in (("LRU", simulator_fast.simulate_into), ("ExpectedNextUse", simulator_enu.simulate_into),
                       ("DeadlineAware", simulator_enu.simulate_into)):
        direct = SimResult(name)
        loop(direct, t, make_policy(name), tm, band_of(t.block_priority), True)
        assert compiled(make_policy(name), t)
        same(simulate(t, make_policy(name), tm, record=True), direct)
    assert not compiled(Variant(), t)
    same(simulate(t, Variant(), tm, record=True), simulate(t, ExpectedNextUse(), tm, record=True, fast=False))
