"""Offline references: MIN and PrioMIN against an exhaustive search, and a textbook reference string."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from kv_policy import codes
from kv_policy.registry import make_policy
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel
from kv_policy.trace import Trace
from tests.policy.conftest import small_trace

SZ = 4096


def _trace(events: list[tuple[int, int]], n_blocks: int, prio: list[int] | None = None) -> Trace:
    """(kind, block) events, one step each; every access is decode-critical."""
    kind = np.array([k for k, _ in events], dtype=np.uint8)
    t = Trace(np.arange(len(events), dtype=np.int64), kind, np.array([b for _, b in events], dtype=np.int32),
              kind == codes.ACCESS, np.full(len(events), codes.WARM, dtype=np.uint8),
              np.full(n_blocks, SZ, dtype=np.int64), np.zeros(n_blocks, dtype=np.int32),
              np.array(prio or [50] * n_blocks, dtype=np.uint8), np.full(n_blocks, 100_000.0))
    t.validate()
    return t


def _tiers(frames: int) -> TierModel:
    return TierModel(DEFAULT_FAST, DEFAULT_SLOW, frames * SZ)


def exhaustive(events: list[tuple[int, int]], frames: int, hi: frozenset[int] = frozenset()) -> tuple[int, int]:
    """The lexicographically smallest (high-priority misses, misses) over every eviction choice (no bypass:
    a missed or allocated block always enters the fast tier, as in the simulator)."""

    @lru_cache(maxsize=None)
    def best(i: int, resident: frozenset[int]) -> tuple[int, int]:
        if i == len(events):
            return (0, 0)
        kind, b = events[i]
        if kind == codes.FREE:
            return best(i + 1, resident - {b})
        if b in resident:
            return best(i + 1, resident)
        cost = (int(b in hi), 1) if kind == codes.ACCESS else (0, 0)
        if len(resident) < frames:
            options = [best(i + 1, resident | {b})]
        else:
            options = [best(i + 1, (resident - {v}) | {b}) for v in resident]
        h, m = min(options)
        return (h + cost[0], m + cost[1])

    return best(0, frozenset())


def _random_events(rng: np.random.Generator, n_blocks: int, n: int) -> list[tuple[int, int]]:
    """Allocations, skewed re-reads and frees of a few blocks (a freed block may be allocated again)."""
    live: set[int] = set()
    out = []
    weights = rng.random(n_blocks) ** 2 + 0.05
    while len(out) < n:
        r = rng.random()
        dead = [b for b in range(n_blocks) if b not in live]
        if dead and (r < 0.15 or not live):
            b = int(rng.choice(dead))
            live.add(b)
            out.append((codes.ALLOC, b))
        elif live and r < 0.2 and len(live) > 1:
            b = int(rng.choice(sorted(live)))
            live.discard(b)
            out.append((codes.FREE, b))
        else:
            cand = sorted(live)
            p = weights[cand] / weights[cand].sum()
            out.append((codes.ACCESS, int(rng.choice(cand, p=p))))
    return out


@pytest.mark.parametrize("seed", range(300))
def test_min_equals_exhaustive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_blocks, frames = int(rng.integers(3, 6)), int(rng.integers(1, 4))
    events = _random_events(rng, n_blocks, int(rng.integers(12, 22)))
    r = simulate(_trace(events, n_blocks), make_policy("MIN"), _tiers(frames))
    assert r.misses == exhaustive(events, frames)[1]


@pytest.mark.parametrize("seed", range(300))
def test_priomin_has_the_fewest_high_priority_misses(seed: int) -> None:
    """Exactly the exhaustive minimum of high-priority misses; its total is MIN-within-band greedy, so it
    can only be at or above the fewest total misses among those schedules."""
    rng = np.random.default_rng(1000 + seed)
    n_blocks, frames = int(rng.integers(3, 6)), int(rng.integers(1, 4))
    events = _random_events(rng, n_blocks, int(rng.integers(12, 22)))
    prio = [int(p) for p in rng.choice([20, 90], size=n_blocks)]
    hi = frozenset(b for b in range(n_blocks) if prio[b] >= 70)
    r = simulate(_trace(events, n_blocks, prio), make_policy("PrioMIN"), _tiers(frames))
    hi_best, total_best = exhaustive(events, frames, hi)
    assert r.hi_misses == hi_best
    assert r.misses >= total_best


# Silberschatz, Operating System Concepts, ch. 10 (virtual memory): with three frames the optimal
# algorithm takes 9 page faults, LRU 12, on this reference string.
TEXTBOOK = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1]


@pytest.mark.parametrize("name,faults", [("MIN", 9), ("LRU", 12)])
def test_textbook_reference_string(name: str, faults: int) -> None:
    ids = sorted(set(TEXTBOOK))
    events = [(codes.ACCESS, ids.index(p)) for p in TEXTBOOK]
    assert simulate(_trace(events, len(ids)), make_policy(name), _tiers(3)).misses == faults


def test_min_is_a_lower_bound_for_every_online_policy_on_a_generated_trace() -> None:
    from kv_policy.registry import is_reference, parse_policies

    t = small_trace("balanced", 2, 10, (32, 96))
    tiers = TierModel(DEFAULT_FAST, DEFAULT_SLOW, t.peak_live_bytes() // 2)  # unlimited budget, no prefetch cost
    floor = simulate(t, make_policy("MIN"), tiers).misses
    for name in parse_policies("all"):
        pol = make_policy(name)
        if not is_reference(name) and not pol.prefetch_on_hint and not pol.predictive_prefetch:
            assert simulate(t, pol, tiers).misses >= floor, name


def test_rate_oracle_lies_between_lru_and_min_and_its_compiled_loop_agrees() -> None:
    """RateOracle knows the attention model's per-block heavy-hitter rates (not the draws): on a generated trace its
    misses are no fewer than MIN's (the fewest possible) and fewer than LRU's; both simulator loops decide alike."""
    from kv_policy.generator import generate
    from kv_policy.profiles import get_profile

    t = generate(get_profile("balanced"), 3, 60_000)
    assert t.block_hh_rate is not None and t.block_hh_rate.max() <= 1.0 and (t.block_hh_rate > 0).any()
    tiers = TierModel(DEFAULT_FAST, DEFAULT_SLOW, t.peak_live_bytes() // 3)
    oracle = simulate(t, make_policy("RateOracle"), tiers)
    floor, lru = simulate(t, make_policy("MIN"), tiers).misses, simulate(t, make_policy("LRU"), tiers).misses
    assert floor <= oracle.misses < lru
    slow = simulate(t, make_policy("RateOracle"), tiers, fast=False)
    assert (slow.misses, slow.dc_misses, slow.spills) == (oracle.misses, oracle.dc_misses, oracle.spills)


def test_rate_oracle_refuses_a_trace_without_the_generators_rates() -> None:
    from harness.errors import UserError

    t = _trace([(codes.ALLOC, 0), (codes.ACCESS, 0)], 1)
    with pytest.raises(UserError, match="RateOracle needs a generated trace"):
        simulate(t, make_policy("RateOracle"), _tiers(1))
