"""Every policy of one trace, in worker processes: the per-seed metrics behind compare, sweep and goals.

A whole serving trace (the Mooncake conversation trace: ~70M events) takes minutes per Python-loop policy, and the
policies are independent: on 2 cores two of them run at once. Workers are forked after the trace is built, so its
columns are shared copy-on-write, not copied (each worker's own footprint is its policy's state and, for the compiled
loop, its heap and keys); each worker runs one policy and exits, returning the policy's metrics only through a pipe,
so the memory a finished policy held goes back to the system. The slowest rows (the Python loop) start first. The
metrics are those of the same simulation run in this process: a worker runs the same code on the same trace.

Every worker is forked here, from the caller's thread, at most `jobs` alive at once. multiprocessing.Pool with
maxtasksperchild=1 forked its replacements from its worker-handler thread and could start one after its terminate()
had collected the workers to signal: `kvds run --quick`'s sweep then waited for an idle worker forever (seen once in
CI on this host, 2026-12-03, the parent in waitpid, the worker on the task queue's lock, 16 minutes).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

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


def _child(spec: str, out: Connection) -> None:
    """A worker: one policy's metrics, or the error that stopped it, sent up its pipe."""
    _worker_start()
    try:
        out.send(("ok", _one(spec)[1]))
    except BaseException as exc:  # handed to the parent, which raises it
        out.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        out.close()


class WorkerError(RuntimeError):
    """A policy's worker failed (its traceback is in the message) or died without an answer."""


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
    ctx = multiprocessing.get_context("fork")
    pending = slowest_first(list(dict.fromkeys(specs)), build)
    running: dict[Connection, tuple[Any, str]] = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                spec = pending.pop(0)
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(spec, writer), daemon=True)
                proc.start()
                writer.close()
                running[reader] = (proc, spec)
            for reader in wait(list(running)):
                proc, spec = running.pop(reader)
                try:
                    kind, value = reader.recv()
                except EOFError:
                    kind, value = "error", "the worker died without an answer"
                reader.close()
                proc.join()
                if kind != "ok" and value.startswith("the worker died"):
                    value += f" (exit status {proc.exitcode})"
                if kind != "ok":
                    raise WorkerError(f"policy {spec}: {value}")
                got[spec] = value
                done()
    finally:
        _work = None
        for reader, (proc, _) in running.items():  # unwinding (an error, SIGINT, SIGTERM): no worker outlives us
            proc.terminate()
            proc.join()
            reader.close()
    return {spec: got[spec] for spec in specs}
