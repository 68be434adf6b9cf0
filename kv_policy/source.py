"""Where a comparison's traces come from: the profile generated per seed, or a trace file (batched per seed when it
is a request trace). Shared by compare and sweep, so both read a file the same way."""
from __future__ import annotations

from typing import Callable

from harness.errors import UserError
from kv_policy.compare import check_seeds
from kv_policy.profiles import Profile
from kv_policy.trace import Trace

TraceForSeed = Callable[[int], Trace]


def trace_source(path: str | None, profile: Profile, seeds: list[int],
                 step_ms: float) -> tuple[TraceForSeed | None, list[int], str]:
    """(trace_for_seed or None, seeds, description). A fixed trace file runs once: seeds cannot vary it."""
    if not path:
        check_seeds(seeds)
        return None, seeds, f"profile {profile.name}"
    from kv_policy.importers import load_trace

    if not step_ms > 0:
        raise UserError("--step-ms must be positive")
    first = load_trace(path, profile, seeds[0], step_ms)  # a bad file fails (file:line) before any work
    if first.meta.get("source") != "request-trace":
        return (lambda seed: first), [seeds[0]], f"trace {path} (one fixed trace: no interval over seeds)"
    check_seeds(seeds)
    return (lambda seed: load_trace(path, profile, seed, step_ms)), seeds, f"requests {path} batched as {profile.name}"
