"""`kvds policy speed`: the simulator's events per CPU second per policy, beside libCacheSim's requests per second on
the same trace's block sequence (kv_policy/speed.py does the timing). It compares nothing, so it files no run."""

from __future__ import annotations

from dataclasses import dataclass

from harness.results import Filed
from kv_policy.speed import SIDE_BY_SIDE, SpeedSummary, speed


@dataclass(frozen=True)
class SpeedConfig:
    events: int = 1_000_000  # trace length
    policy: str = "ExpectedNextUse"
    profile: str = "balanced"
    fast_fraction: float = 0.5
    repeat: int = 3          # timed repetitions (the median is reported)
    side_by_side: tuple[str, ...] = SIDE_BY_SIDE  # policies timed on the same trace beside libCacheSim


def run(cfg: SpeedConfig) -> Filed[SpeedSummary]:
    return Filed(None, speed(cfg))
