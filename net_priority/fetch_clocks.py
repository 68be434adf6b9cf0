"""A fetch's clocks, and the host's share of its latency set apart from the network's.

The fetcher stamps five CLOCK_MONOTONIC times per fetch (net_priority/endpoint/fetcher.py): due (its place in the
open-loop schedule), issued (just before the request is sent), sent (the send call returned: with TCP_NODELAY the
8-byte request has been handed to TCP and, the window being open, transmitted in that call), first (the first
receive of answer bytes returned) and done (the last answer byte received). From them:

- e2e = done - due: what the decode step waited, everything included;
- wake-up lateness = issued - max(due, previous done): how late the fetcher ran once it could (it was not woken or
  not scheduled in time: the host's CPUs, not the network);
- behind = max(0, previous done - due): the wait behind a slow predecessor (the network's, carried forward);
- network = done - sent: the request's way to the prefill side, the server's answer, the bottleneck qdisc and the
  wire: the clock the mechanisms under test (classes, pacing) control, and the one the goal is judged on.

A repetition is *stalled* when the fetch path was held off its CPUs beyond the threshold (`--stall-ms`, default
10 ms, one decode step): the fetcher's or the fetch-server's run-queue wait over the fetch window (schedstat,
summed over threads) exceeds it, or a single fetch's wake-up lateness does. The bulk endpoints' run-queue waits
are kept as evidence beside them but do not flag a repetition (they slow the bulk mover, not a fetch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from net_priority.estimates import RepSamples

FETCH_PATH = ("fetcher", "fetch-server")  # the endpoints whose descheduling delays a fetch


def wake_lateness(due: np.ndarray, issued: np.ndarray, done: np.ndarray) -> np.ndarray:
    """issued - max(due, the previous fetch's done): the fetcher's own lateness, not its wait behind a predecessor."""
    prev_done = np.concatenate([due[:1], done[:-1]])
    return issued - np.maximum(due, prev_done)


def stall_of(wake_late_ns: np.ndarray, runq_ns: dict[str, int | None], stall_ms: float) -> dict[str, Any]:
    """Whether a repetition was stalled and the evidence: each endpoint's run-queue wait (ms) over the window, the
    largest wake-up lateness (ms) and how many fetches woke later than the threshold."""
    limit = stall_ms * 1e6
    runq_ms = {k: (None if v is None else round(v / 1e6, 3)) for k, v in sorted(runq_ns.items())}
    late = int((wake_late_ns > limit).sum()) if wake_late_ns.size else 0
    why = [f"{k} waited {runq_ms[k]:g} ms on a run queue" for k in FETCH_PATH
           if runq_ns.get(k) is not None and runq_ns[k] > limit]  # type: ignore[operator]
    if late:
        why.append(f"{late} fetch(es) woke more than {stall_ms:g} ms late")
    return {"stalled": bool(why), "why": "; ".join(why), "runq_ms": runq_ms,
            "max_wake_late_ms": round(float(wake_late_ns.max()) / 1e6, 3) if wake_late_ns.size else None,
            "late_wakeups": late, "threshold_ms": stall_ms}


def rep_samples(z: dict[str, np.ndarray], warmup: int, step_ms: float, stall_ms: float,
                runq_ns: dict[str, int | None], **rest: Any) -> RepSamples:
    """One repetition's RepSamples from the fetcher's arrays (warm-up fetches dropped after the lateness, which
    needs each fetch's predecessor, is computed)."""
    due, issued, sent, done = (z[k].astype(np.int64) for k in ("intended_ns", "issue_ns", "sent_ns", "done_ns"))
    late_ns = wake_lateness(due, issued, done)[warmup:]
    due, issued, sent, done = due[warmup:], issued[warmup:], sent[warmup:], done[warmup:]
    return RepSamples(latency_ns=done - due, service_ns=done - issued, size=z["size"][warmup:],
                      late=int(((issued - due) > step_ms * 1e6).sum()), network_ns=done - sent,
                      wake_late_ns=late_ns, stall=stall_of(late_ns, runq_ns, stall_ms), **rest)
