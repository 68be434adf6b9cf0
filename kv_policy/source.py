"""Where a comparison's traces come from: the profile generated per seed, or a trace file (run again per seed when
the seed changes it: a request trace's batching, a serving trace's priority assignment). Shared by compare, sweep
and goals, so all read a file the same way."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kv_policy.compare import check_seeds
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.profiles import Profile
from kv_policy.trace import Trace

TraceForSeed = Callable[[int], Trace]
PER_SEED = ("request-trace", "serving-trace")  # trace sources the seed changes


@dataclass(frozen=True)
class Source:
    trace_for_seed: TraceForSeed | None   # None: generate the profile per seed
    seeds: list[int]
    description: str                      # what is simulated, in words
    priorities: str | None                # who assigned priorities (a serving trace: kvds's rule and the seeds)
    config: dict[str, Any] | None         # the trace options as filed in meta.json


def trace_source(opts: TraceOptions | None, profile: Profile, seeds: list[int]) -> Source:
    """The traces of a comparison. A fixed trace file runs once: seeds cannot vary it."""
    if opts is None:
        check_seeds(seeds)
        return Source(None, seeds, f"profile {profile.name}", None, None)
    first = load_trace(opts, profile, seeds[0])  # a bad file fails (file:line) before any work
    kind, path = first.meta.get("source"), opts.resolved()
    if kind not in PER_SEED:
        return Source(lambda seed: first, [seeds[0]], f"trace {path} (one fixed trace: no interval over seeds)",
                      None, opts.as_dict())
    check_seeds(seeds)
    cache = {seeds[0]: first}

    def for_seed(seed: int) -> Trace:
        return cache.pop(seed, None) or load_trace(opts, profile, seed)

    if kind == "serving-trace":
        m = first.meta
        desc = (f"{m['format']} trace {path}: {m['requests']} requests, {m['prefix_blocks']} prefix blocks, "
                f"{m['max_active']} admitted at once")
        rule = first.meta["priorities"].rsplit("; seed", 1)[0] + f"; seeds {_seeds(seeds)})"
        return Source(for_seed, seeds, desc, rule, opts.as_dict())
    return Source(for_seed, seeds, f"requests {path} batched as {profile.name}", None, opts.as_dict())


def _seeds(seeds: list[int]) -> str:
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))
