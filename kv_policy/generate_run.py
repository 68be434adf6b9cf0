"""`kvds policy generate`: write a generated trace (.npz) and report what it holds (files no run)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.results import Filed, StoredSummary
from kv_policy.profiles import Profile
from kv_policy.trace import Trace, save


@dataclass(frozen=True)
class GenerateConfig:
    profile: Profile
    seed: int
    events: int | None  # stop at this many events (None: the profile's requests)
    out: str


@dataclass(frozen=True)
class GenerateSummary(StoredSummary):
    """What a written trace holds."""
    path: str               # the .npz written
    counts: dict[str, int]  # events by kind, decode-critical accesses, blocks and steps
    peak_live_bytes: int    # most KV bytes alive at once


def written(trace: Trace, out: str) -> tuple[str, dict[str, int], int]:
    """Save `trace` (whole or not at all) and say what it holds."""
    return str(save(trace, out)), trace.counts(), int(trace.peak_live_bytes())


def run(cfg: GenerateConfig) -> Filed[GenerateSummary]:
    from kv_policy.generator import generate

    return Filed(None, GenerateSummary(*written(generate(cfg.profile, cfg.seed, cfg.events), cfg.out)))
