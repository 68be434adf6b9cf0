"""What the policy track's test files share: a small generated trace, built one way."""

from __future__ import annotations

import numpy as np

from kv_policy.generator import generate
from kv_policy.profiles import get_profile
from kv_policy.simulator import SimResult
from kv_policy.trace import Trace


def small_trace(profile: str, seed: int, n_requests: int, gen_tokens: tuple[int, int], **overrides) -> Trace:
    """A generated trace of `n_requests` requests of `profile` (the tests' size: seconds to simulate)."""
    return generate(get_profile(profile, n_requests=n_requests, gen_tokens=gen_tokens, **overrides), seed)


RUN_COUNTS = ("dc_accesses", "dc_misses", "band_accesses", "band_misses", "accesses", "misses", "spills", "spill_bytes",
              "clean_evictions", "drops", "recomputes", "prefetches", "prefetch_used", "prefetch_dropped",
              "background_wait_us")
RUN_ARRAYS = ("step_latency_us", "rs_step", "rs_deadline_us", "rs_band")


def same_run(a: SimResult, b: SimResult) -> None:
    """Two simulations made the same decisions: every count, step latency, SLO record and the recorded operation log."""
    for f in RUN_COUNTS:
        assert getattr(a, f) == getattr(b, f), f
    for f in RUN_ARRAYS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert a.ops is not None and b.ops is not None
    for k in a.ops:
        assert a.ops[k].dtype == b.ops[k].dtype and np.array_equal(a.ops[k], b.ops[k]), k
