"""What the policy track's test files share: a small generated trace, built one way."""

from __future__ import annotations

from kv_policy.generator import generate
from kv_policy.profiles import get_profile
from kv_policy.trace import Trace


def small_trace(profile: str, seed: int, n_requests: int, gen_tokens: tuple[int, int], **overrides) -> Trace:
    """A generated trace of `n_requests` requests of `profile` (the tests' size: seconds to simulate)."""
    return generate(get_profile(profile, n_requests=n_requests, gen_tokens=gen_tokens, **overrides), seed)
