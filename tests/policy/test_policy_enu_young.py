"""ExpectedNextUse's `young` option: the exposure-aware Gamma-Poisson key, checked by hand on a known read sequence,
and its checkpoints (a block's key is refreshed as its exposure grows, without any event of its own)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from harness.errors import UserError
from kv_policy import codes
from kv_policy.expected_next_use import ExpectedNextUse, checkpoint_age, young_correction
from kv_policy.simulator import simulate
from kv_policy.generator import generate
from kv_policy.profiles import get_profile
from kv_policy.simulator_enu import eligible
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
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


def test_young_off_is_the_shipped_key_and_on_runs_the_python_loop() -> None:
    """young=0 changes nothing (the compiled loop, the same decisions as without the option); young > 0 is not
    compiled and runs the Python reference loop; a weight outside [0, 1) is refused."""
    t = generate(get_profile("balanced"), 0, 3_000)
    tm = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    assert eligible(ExpectedNextUse(young=0.0), t) and not eligible(ExpectedNextUse(young=0.05), t)
    a, b = simulate(t, ExpectedNextUse(young=0.0), tm), simulate(t, ExpectedNextUse(), tm, fast=False)
    assert (a.dc_misses, a.spills, a.prefetches) == (b.dc_misses, b.spills, b.prefetches)
    y = simulate(t, ExpectedNextUse(young=0.05), tm)
    assert y.dc_accesses == a.dc_accesses and np.asarray(y.step_latency_us).size == np.asarray(a.step_latency_us).size
    with pytest.raises(UserError, match="young=1.0 must be in"):
        ExpectedNextUse(young=1.0)
