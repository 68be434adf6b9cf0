"""The coverage of the delivery track's interval (fetch p99 / unloaded, paired by repetition, on the network clock):
does a nominal 95 % interval contain the true ratio about 95 % of the time, at the bench's default size (5
repetitions x 1,000 fetches)? Synthetic fetches: log-normal network times (median 300 us, sigma 0.8: a tail of
~2 ms at p99, as the unloaded lab has), each repetition pair scaled by a drift both sides share (+-25 %: the host's
load between repetitions), the variant the same process 1.3 x slower, so the true p99 ratio is exactly 1.3."""

from __future__ import annotations

import math

import numpy as np

from net_priority.estimates import RepSamples, interference

MU, SIGMA, DRIFT, SLOWER, REPS, FETCHES, TRIALS = math.log(300e3), 0.8, 0.25, 1.3, 5, 1000, 200


def _pair(rng: np.random.Generator) -> tuple[RepSamples, RepSamples]:
    drift = rng.uniform(1 - DRIFT, 1 + DRIFT)

    def rep(scale: float) -> RepSamples:
        net = (rng.lognormal(MU, SIGMA, FETCHES) * drift * scale).astype(np.int64)
        return RepSamples(latency_ns=net + 1000, service_ns=net, size=np.full(FETCHES, 16384), late=0,
                          bulk_mbit=850.0, network_ns=net, wake_late_ns=np.zeros(FETCHES, dtype=np.int64))
    return rep(SLOWER), rep(1.0)


def test_the_paired_network_interval_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(31)
    hits = 0
    for _ in range(TRIALS):
        pairs = [_pair(rng) for _ in range(REPS)]
        inter, _, clock = interference([a for a, _ in pairs], [b for _, b in pairs])
        assert clock == "network" and inter is not None
        hits += inter["lo"] <= SLOWER <= inter["hi"]
    coverage = hits / TRIALS
    print(f"coverage of the nominal 95% interval: {coverage:.3f} ({TRIALS} trials of {REPS} x {FETCHES} fetches)")
    assert coverage >= 0.90, coverage
