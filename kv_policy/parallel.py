"""Every policy of one trace, in worker processes: the per-seed metrics behind compare, sweep and goals.

A whole serving trace (the Mooncake conversation trace: ~70M events) takes minutes per Python-loop policy, and the
policies are independent: on 2 cores two of them run at once. Workers are forked after the trace is built, so its
columns are shared copy-on-write, not copied (each worker's own footprint is its policy's state and, for the compiled
loop, its heap and keys); each worker runs one policy and exits (maxtasksperchild=1), returning the policy's metrics
only, so the memory a finished policy held goes back to the system. The slowest rows (the Python loop) start first.
The metrics are those of the same simulation run in this process: a worker runs the same code on the same trace.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from typing import Callable

from kv_policy import simulator_fast
from kv_policy.metrics import run_metrics
from kv_policy.registry import make_policy
from kv_policy.simulator import simulate
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace

PARALLEL_MIN_EVENTS = 1_000_000  # below this, a worker's start costs more than the policies it would overlap

Build = Callable[[str], object]
_work: tuple[Trace, TierModel, Build] | None = None  # what a forked worker simulates (set before the fork)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def jobs_for(trace: Trace, jobs: int, n_policies: int) -> int:
    """Worker processes to use: `jobs` (0 = one per available CPU), at most one per policy; one on a short trace."""
    want = jobs or (available_cpus() if len(trace) >= PARALLEL_MIN_EVENTS else 1)
    return max(1, min(want, n_policies))


def _worker_start() -> None:
    """A worker dies quietly on the SIGTERM the pool's shutdown sends its idle workers: the handler forked from kvds's
    CLI (raise, restore kernel state, print) belongs to the parent, which owns the run and its journal."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _one(spec: str) -> tuple[str, dict]:
    trace, tiers, build = _work
    return spec, run_metrics(simulate(trace, build(spec), tiers), trace)


def slowest_first(specs: list[str], build: Build) -> list[str]:
    """Policies outside the event-keyed compiled loop (ExpectedNextUse and DeadlineAware in theirs, the Python loop)
    before the event-keyed ones (stable otherwise), so the longest rows overlap each other."""
    return sorted(specs, key=lambda s: simulator_fast.eligible(build(s)))


def metrics_per_policy(trace: Trace, tiers: TierModel, specs: list[str], jobs: int,
                       build: Build = make_policy, done: Callable[[], None] = lambda: None) -> dict[str, dict]:
    """Per policy spec (in the order given), `run_metrics` of simulating it on `trace`; `jobs` worker processes
    (1: in this process). `done` is called as each policy finishes."""
    global _work
    if jobs <= 1 or len(specs) <= 1:
        out = {}
        for spec in specs:
            out[spec] = run_metrics(simulate(trace, build(spec), tiers), trace)
            done()
        return out
    _work = (trace, tiers, build)
    got: dict[str, dict] = {}
    try:
        with multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_start, maxtasksperchild=1) as pool:
            for spec, m in pool.imap_unordered(_one, slowest_first(list(dict.fromkeys(specs)), build)):
                got[spec] = m
                done()
    finally:
        _work = None
    return {spec: got[spec] for spec in specs}
