"""A serving trace's requests as the engine emulator runs them: arrival steps, kvds-assigned priorities and
deadlines (the traces have none), shared prefix blocks, and concurrency limits scaled to the arrival rate.

Priorities (the rule every run of such a trace names): each request draws one of the profile's tenant classes with
the classes' weights, then a priority uniformly within the class's range; its TPOT deadline is the class's. The
draws come from numpy's default_rng([seed, 28]), in trace order, so a seed is one priority assignment and the same
seed gives the same assignment on every host.

Concurrency (Little's law): a trace arriving at lambda requests per decode step, each decoding for its output
length, keeps lambda x mean(output tokens) requests in flight. The engine admits 1.5 times that (at least 4) and
decodes every admitted request each step (continuous batching, as vLLM and SGLang do), so the queue stays bounded
at the trace's own rate; a fixed batch of 8 against ~3.4 requests/s of ~340-token answers would queue without end.

Prefix reuse: each hash id is one 512-token block of KV content shared by every request naming it (the engine's
shared-document blocks): it maps onto ceil(512 / block_tokens) engine blocks, the last hash of a request onto what
its input has left. When its last reader finishes it stays cached, evictable and no longer decode-critical, and a
later request naming it hits it or pays its load or recompute.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from kv_policy.engine import RequestSpec
from kv_policy.profiles import Profile
from kv_policy.serving_traces import HASH_BLOCK_TOKENS, ServedRequest

HEADROOM = 1.5
MIN_ACTIVE = 4
RULE_STREAM = 28  # the rng stream of the priority rule: default_rng([seed, RULE_STREAM])


def priority_rule(profile: Profile, seed: int | str) -> str:
    """The one line every table and JSON summary of a serving-trace run carries."""
    classes = "; ".join(f"{c.weight:g} at priority {c.prio_lo}-{c.prio_hi}, TPOT {c.tpot_us / 1e3:g} ms"
                        for c in profile.classes)
    return (f"priorities assigned by kvds (rule: each request draws a class of profile {profile.name} [{classes}] "
            f"and a uniform priority within it, numpy default_rng([seed, {RULE_STREAM}]); seed {seed})")


def concurrency(reqs: list[ServedRequest], step_ms: float) -> int:
    """Admitted requests (= decoded per step) for this arrival rate (the module docstring's rule)."""
    span_steps = max(1.0, reqs[-1].arrival_s * 1000.0 / step_ms)
    rate = (len(reqs) - 1) / span_steps  # arrivals per step: gaps between the first and the last
    mean_out = float(np.mean([r.output_tokens for r in reqs]))
    return max(MIN_ACTIVE, math.ceil(round(HEADROOM * rate * mean_out, 6)))  # (no float dust above a whole)


def engine_profile(profile: Profile, reqs: list[ServedRequest], step_ms: float) -> Profile:
    active = concurrency(reqs, step_ms)
    return replace(profile, max_active=active, batch=active, rag_doc_tokens=HASH_BLOCK_TOKENS)


def specs(reqs: list[ServedRequest], profile: Profile, seed: int, step_ms: float) -> list[RequestSpec]:
    """The engine's requests, priorities drawn by the seeded rule."""
    rng = np.random.default_rng([seed, RULE_STREAM])
    weights = np.array([c.weight for c in profile.classes], dtype=float)
    picks = rng.choice(len(profile.classes), size=len(reqs), p=weights / weights.sum())
    out = []
    for r, k in zip(reqs, picks.tolist()):
        c = profile.classes[k]
        prio = int(rng.integers(c.prio_lo, c.prio_hi + 1))
        doc_tokens: tuple[int, ...] = ()
        private = r.input_tokens
        if r.hash_ids:
            n = len(r.hash_ids)
            last = min(HASH_BLOCK_TOKENS, r.input_tokens - HASH_BLOCK_TOKENS * (n - 1))
            doc_tokens = (HASH_BLOCK_TOKENS,) * (n - 1) + (last,)
            private = r.input_tokens - sum(doc_tokens)
        out.append(RequestSpec(int(r.arrival_s * 1000.0 / step_ms), private, r.output_tokens, prio, c.tpot_us,
                               tuple(r.hash_ids), doc_tokens))
    return out
