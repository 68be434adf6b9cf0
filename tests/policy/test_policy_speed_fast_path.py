"""The simulator's compiled loop (kv_policy/simulator_fast.py) makes the reference loop's decisions: every count,
every step latency and SLO record, and the whole recorded operation log, on generated traces of every profile."""
from __future__ import annotations

import pytest

from harness.errors import UserError
from kv_policy import simulator_fast
from kv_policy.generator import generate
from kv_policy.profiles import PROFILES, get_profile
from kv_policy.registry import make_policy, parse_policies
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel, for_trace
from kv_policy.trace import Trace
from tests.policy.conftest import same_run as same


def tiers(t: Trace, fraction: float, slow_fraction: float) -> TierModel:
    return for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, max(int(t.block_size.max()), int(t.peak_live_bytes() * fraction)),
                     int(t.peak_live_bytes() * slow_fraction))


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("policy", ["LRU", "MIN", "PrioMIN", "vLLM-prefix", "SGLang-radix", "SGLang-priority",
                                    "TRTLLM-retention"])
def test_fast_path_decides_as_the_reference_loop(profile: str, policy: str) -> None:
    t = generate(get_profile(profile), 3, 40_000)
    for fraction, slow_fraction in ((0.3, 0.0), (0.5, 0.6)):   # unbounded slow tier, and one that must release
        tm = tiers(t, fraction, slow_fraction)
        fast = simulate(t, make_policy(policy), tm, record=True)
        ref = simulate(t, make_policy(policy), tm, record=True, fast=False)
        assert fast.misses > 0 and fast.spills > 0
        same(fast, ref)


@pytest.mark.parametrize("policy", ["LRU", "MIN", "SGLang-priority"])
def test_fast_path_sheds_stale_heap_entries_and_grows_as_the_reference_loop(policy: str, monkeypatch) -> None:
    """Columns that start at 8 entries: the heap is compacted and every array regrown thousands of times, and the
    decisions are still the reference loop's (and those of the large starting size)."""
    t = generate(get_profile("balanced"), 1, 30_000)
    tm = tiers(t, 0.5, 0.6)
    ref = simulate(t, make_policy(policy), tm, record=True, fast=False)
    big = simulate(t, make_policy(policy), tm, record=True)
    monkeypatch.setattr(simulator_fast, "START_CAP", 8)
    small = simulate(t, make_policy(policy), tm, record=True)
    assert len(t) > 1000 * 8 and small.step_latency_us.size > 8
    same(small, ref)
    same(big, ref)


def test_only_event_keyed_policies_take_the_fast_path() -> None:
    fast = {p for p in parse_policies("all,engines") if simulator_fast.eligible(make_policy(p))}
    assert fast == {"LRU", "MIN", "PrioMIN", "vLLM-prefix", "SGLang-radix", "SGLang-priority", "TRTLLM-retention"}
    assert not simulator_fast.eligible(make_policy("TRTLLM-retention", duration_steps=5))  # expiries: Python loop


@pytest.mark.parametrize("policy", ["LRU", "ExpectedNextUse"])  # each compiled loop (simulator_enu.py: the second)
def test_fast_path_refuses_as_the_reference_loop(policy: str) -> None:
    t = generate(get_profile("balanced"), 0, 5_000)
    size = int(t.block_size.max())
    small = TierModel(DEFAULT_FAST, DEFAULT_SLOW, size // 2)
    full = TierModel(DEFAULT_FAST, DEFAULT_SLOW, size * 4, slow_capacity=size)
    for tm in (small, full):
        msgs = []
        for fast in (True, False):
            with pytest.raises(UserError) as e:
                simulate(t, make_policy(policy), tm, fast=fast)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def test_speed_puts_policies_beside_libcachesim_on_the_same_sequence(kvds_env: dict) -> None:
    """Figures only: every side-by-side row and libCacheSim algorithm is there, on the trace's accessed blocks."""
    from kv_policy import codes
    from kv_policy.speed import LCS_ALGORITHMS, speed
    from kv_policy.speed_run import SpeedConfig

    cfg = SpeedConfig(events=20_000, policy="LRU", repeat=1, side_by_side=("LRU", "vLLM-prefix", "ExpectedNextUse"))
    out = speed(cfg)
    t = generate(get_profile("balanced"), 0, 20_000)
    assert out.sequence_requests == int((t.kind == codes.ACCESS).sum())
    assert [r["policy"] for r in out.side_by_side] == ["LRU", "vLLM-prefix", "ExpectedNextUse"]
    assert [r["compiled"] for r in out.side_by_side] == [True, True, True]
    assert [r["algorithm"] for r in out.libcachesim] == list(LCS_ALGORITHMS)
    assert all(r["requests_per_s"] > 0 and 0.0 <= r["hit_ratio"] <= 1.0 for r in out.libcachesim)
    assert all(r["events_per_s"] > 0 for r in out.side_by_side)
    assert [r["target"] for r in out.side_by_side] == [1_000_000, 1_000_000, 500_000]


@pytest.mark.parametrize("profile", ["balanced", "rag_mixed_priority", "long_context_extreme"])
@pytest.mark.parametrize("policy", ["ExpectedNextUse", "IntentAware", "PredictiveHotness",
                                    "TRTLLM-retention:duration_steps=3"])
def test_heap_compaction_changes_no_decision(profile: str, policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python loop drops superseded heap entries once the heap outgrows its live ones: rebuilt every few pushes
    or never, the decisions are the same."""
    from kv_policy import simulator

    t = generate(get_profile(profile), 4, 30_000)
    name, _, rest = policy.partition(":")
    params = {k: float(v) for k, v in (kv.split("=") for kv in rest.split(":") if kv)}
    runs = []
    for compact_min in (10**12, 16):
        monkeypatch.setattr(simulator, "COMPACT_MIN", compact_min)
        runs.append(simulate(t, make_policy(name, **params), tiers(t, 0.3, 0.0), record=True, fast=False))
    assert runs[0].misses > 0
    same(runs[0], runs[1])
