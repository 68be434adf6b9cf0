"""ExpectedNextUse's `young` option (shipped at 0.05): the exposure-aware Gamma-Poisson key, checked by hand on a known
read sequence, and its checkpoints (a block's key is refreshed as its exposure grows, without any event of its own),
in the Python policy and in the compiled loop's calendar (the same decisions)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from harness.errors import UserError
from kv_policy import codes, simulator_enu
from kv_policy.expected_next_use import YOUNG, ExpectedNextUse, checkpoint_age, young_correction
from kv_policy.simulator import simulate
from kv_policy.generator import generate
from kv_policy.profiles import get_profile
from kv_policy.registry import make_policy
from kv_policy.simulator_enu import eligible
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from kv_policy.trace import Trace
from tests.policy.conftest import same_run as same
from tests.policy.test_policy_enu_compiled import hand_trace

LN2 = math.log(2.0)


def test_exposure_term_and_checkpoints_by_hand() -> None:
    """weight 0.5, exp(-lam) = 1/2: exposure 1 - 0.5 x 2^-age = 0.5, 0.75, 0.875, 0.9375 at ages 0-3."""
    assert young_correction(0.5, LN2, 0) == pytest.approx(math.log(2.0))
    assert young_correction(0.5, LN2, 1) == pytest.approx(math.log(4.0 / 3.0))
    assert young_correction(0.5, LN2, 3) == pytest.approx(-math.log(0.9375))
    assert checkpoint_age(0.5, LN2, 0, 1.25) == 1     # 0.5 -> 0.625 first reached at age 1 (0.75)
    assert checkpoint_age(0.5, LN2, 1, 1.25) == 3     # 0.75 -> 0.9375 reached at age 3 exactly
    assert checkpoint_age(0.5, LN2, 3, 1.25) is None  # 1.17 x would exceed the horizon: settled


def test_key_is_the_posterior_mean_of_a_known_read_sequence() -> None:
    """One candidate block born at step 0, read by its request's decodes at steps 2 and 5: its key at step 5 is
    lam x 5 + log(H x rate), rate = (weight m H e^{-5 lam} + e^{-3 lam} + 1) / (weight H e^{-5 lam} + H (1 - e^{-5 lam}))
    with m = p x heavy-hitter reads per decode / 32 blocks (the start values, the context still unknown); after two
    quiet steps the checkpoint refreshes it to the same posterior at age 7 (no read added)."""
    w, lam = 0.25, 0.1
    t = hand_trace([(0, codes.ALLOC, 0, False, codes.RECOMPUTE_OK)], 1, [0])
    pol = ExpectedNextUse(young=w, decay=lam, fresh_first=0)
    pol.bind(t)
    H = pol.horizon
    m = 0.5 * 4.0 / 32  # P_START x HH_START / NOMINAL_BLOCKS
    pol.on_event(0, codes.ALLOC, 0, 0, False, codes.RECOMPUTE_OK)
    assert pol.score[0] == pytest.approx(math.log(H * m))  # at birth: the prior mean m
    pol.stale()
    for s in (2, 5):
        pol.on_event(s, codes.ACCESS, 0, s, True, 0)

    def key(age: int, reads: float) -> float:
        e = math.exp(-lam * age)
        rate = (w * m * H * e + reads) / (w * H * e + H * (1.0 - e))
        return lam * age + math.log(H * rate)

    assert pol.score[0] == pytest.approx(key(5, math.exp(-3 * lam) + 1.0))
    refreshed = []
    for s in range(5, 12):  # the steps end without events of this block: only checkpoints move its key
        pol.cur_step = s
        refreshed += [(s + 1, b) for b in pol.stale()]
        if refreshed and refreshed[-1][0] == s + 1:
            now = s + 1
            assert pol.score[0] == pytest.approx(key(now, math.exp(-(now - 2) * lam) + math.exp(-(now - 5) * lam)))
    assert refreshed and all(b == 0 for _, b in refreshed)


def test_young_is_shipped_and_compiled_and_zero_is_the_previous_key() -> None:
    """The shipped default is YOUNG (0.05); every weight runs in the compiled loop and decides as the Python loop;
    young=0 is the previous rounds' key (no base, no calendar) and decides otherwise; a weight outside [0, 1) is
    refused."""
    t = generate(get_profile("balanced"), 0, 3_000)
    tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    assert ExpectedNextUse().young == YOUNG == 0.05
    assert eligible(ExpectedNextUse(young=0.0), t) and eligible(ExpectedNextUse(), t)
    old, new = (simulate(t, ExpectedNextUse(young=w), tm, record=True) for w in (0.0, YOUNG))
    same(old, simulate(t, ExpectedNextUse(young=0.0), tm, record=True, fast=False))
    same(new, simulate(t, ExpectedNextUse(), tm, record=True, fast=False))
    assert new.dc_accesses == old.dc_accesses and not np.array_equal(new.ops["block"], old.ops["block"])
    with pytest.raises(UserError, match="young=1.0 must be in"):
        ExpectedNextUse(young=1.0)


def gapped(t: Trace, every: int, gap: int) -> Trace:
    """The trace with `gap` empty steps after every `every` steps (the calendar's long jumps between events)."""
    return dataclasses.replace(t, step=t.step + gap * (t.step // every))


@pytest.mark.parametrize("policy", ("ExpectedNextUse", "DeadlineAware"))
def test_compiled_calendar_refreshes_as_the_python_loop(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints fall in the steps between events (gaps of 3 and of 100, over the Python loop's 64-step walk),
    on blocks spilled, dropped, freed or back in the window; the calendar pool starts at 8 entries and is
    recycled and regrown: every decision is the Python loop's, and the refreshes change decisions."""
    monkeypatch.setattr(simulator_enu, "START_CAP", 8)
    base = generate(get_profile("rag_mixed_priority"), 4, 20_000)
    for t, w, decay in ((gapped(base, 5, 3), 0.25, 0.05), (gapped(base, 7, 100), YOUNG, 0.02), (base, 0.5, 0.1)):
        tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.2))
        fast = simulate(t, make_policy(policy, young=w, decay=decay), tm, record=True)
        same(fast, simulate(t, make_policy(policy, young=w, decay=decay), tm, record=True, fast=False))
        assert fast.dc_misses > 0
        plain = simulate(t, make_policy(policy, young=0.0, decay=decay), tm, record=True)
        assert fast.dc_misses != plain.dc_misses or not np.array_equal(fast.ops["block"], plain.ops["block"])
