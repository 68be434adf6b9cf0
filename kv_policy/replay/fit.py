"""Re-fit the simulator's tier latencies to what replay measured, so "simulated" can use this host's costs.

With one block size, latency and bandwidth cannot be separated; bandwidths keep their
configured values and each latency is set so that latency + size / bandwidth equals the
measured median of that operation. The gap that remains between the re-fitted simulation
and the replay is queueing and contention the simulator does not model.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from kv_policy.replay.execute import ReplayRun
from kv_policy.tiers import Tier


def _median(runs: list[ReplayRun], op: str) -> float | None:
    vals = [v for r in runs for v in r.op_us.get(op, [])]
    return float(np.median(vals)) if vals else None


def fit_tiers(runs: list[ReplayRun], nbytes: int, fast: Tier, slow: Tier) -> tuple[Tier, Tier]:
    """Fast read from hits, slow read from misses, slow write from synchronous spills (unchanged if unseen)."""
    hit, miss, spill = _median(runs, "hit"), _median(runs, "miss"), _median(runs, "spill-sync")
    if hit is not None:
        fast = replace(fast, read_latency_us=max(0.0, hit - nbytes / (fast.read_gbps * 1e3)))
    if miss is not None:
        slow = replace(slow, read_latency_us=max(0.0, miss - nbytes / (slow.read_gbps * 1e3)))
    if spill is not None:
        slow = replace(slow, write_latency_us=max(0.0, spill - nbytes / (slow.write_gbps * 1e3)))
    return fast, slow


def as_flags(fast: Tier, slow: Tier) -> str:
    """The fitted latencies as `--tier` flags for `kvds policy compare`."""
    return (f"--tier fast.read_latency_us={fast.read_latency_us:.1f} --tier slow.read_latency_us="
            f"{slow.read_latency_us:.0f} --tier slow.write_latency_us={slow.write_latency_us:.0f}")
