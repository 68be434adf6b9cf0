"""Seeded synthetic workloads: profile -> request list -> engine events."""
from __future__ import annotations

import numpy as np

from kv_policy.engine import Engine, RequestSpec
from kv_policy.footprint import model_shape
from kv_policy.profiles import Profile
from kv_policy.trace import Trace


def _log_uniform(rng: np.random.Generator, lo: int, hi: int, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi) + 1e-12, n)).astype(np.int64).clip(lo, hi)


def request_specs(profile: Profile, seed: int, n_requests: int | None = None) -> list[RequestSpec]:
    """Draw arrivals (Poisson), lengths (log-uniform), tenant classes and RAG documents from the seed."""
    rng = np.random.default_rng([seed, 1])
    n = n_requests or profile.n_requests
    gaps = rng.exponential(1.0 / profile.arrivals_per_step, n) if profile.arrivals_per_step > 0 else np.zeros(n)
    arrivals = np.floor(np.cumsum(gaps) - gaps[0]).astype(np.int64)
    prompts = _log_uniform(rng, *profile.prompt_tokens, n)
    gens = _log_uniform(rng, *profile.gen_tokens, n)
    weights = np.array([c.weight for c in profile.classes], dtype=float)
    cls_idx = rng.choice(len(profile.classes), size=n, p=weights / weights.sum())
    specs = []
    for i in range(n):
        c = profile.classes[cls_idx[i]]
        docs: tuple[int, ...] = ()
        if profile.rag_docs:
            k = min(profile.rag_docs_per_request, profile.rag_docs)
            ranks = (profile.rag_docs * rng.random(k * 4) ** profile.rag_gamma).astype(np.int64)
            docs = tuple(dict.fromkeys(ranks.tolist()))[:k]
        specs.append(RequestSpec(int(arrivals[i]), int(prompts[i]), int(gens[i]),
                                 int(rng.integers(c.prio_lo, c.prio_hi + 1)), c.tpot_us, docs))
    return specs


def generate(profile: Profile, seed: int, max_events: int | None = None) -> Trace:
    """A trace for `profile`; with `max_events`, requests are added until the trace is that long."""
    block_bytes = model_shape(profile.model).block_bytes(profile.block_tokens)
    n_req = profile.n_requests
    while True:
        specs = request_specs(profile, seed, n_req)
        trace = Engine(profile, block_bytes, seed).run(specs, max_events)
        if max_events is None or len(trace) >= max_events:
            break
        n_req = int(n_req * 1.3 * max_events / max(1, len(trace))) + 1
    trace.meta = {"source": "generator", "profile": profile.as_dict(), "seed": seed,
                  "block_bytes": block_bytes, "requests": len(specs)}
    return trace
