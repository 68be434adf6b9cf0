"""`kvds policy generate` and `kvds policy import`: write a kvds trace (.npz) and report what it holds."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import UserError
from kv_policy.profiles import Profile
from kv_policy.trace import Trace, save


@dataclass(frozen=True)
class GenerateConfig:
    profile: Profile
    seed: int
    events: int | None  # stop at this many events (None: the profile's requests)
    out: str


@dataclass(frozen=True)
class ImportConfig:
    format: str         # "prototype" (JSONL) or "requests" (CSV/JSONL)
    inp: str
    out: str
    profile: Profile | None  # how request traces are batched (None: a prototype JSONL)
    seed: int
    step_ms: float      # decode step length for request arrival times


@dataclass(frozen=True)
class TraceSummary:
    """What a written trace holds (generate and import file no run)."""
    path: str               # the .npz written
    counts: dict[str, int]  # events by kind, decode-critical accesses, blocks and steps
    peak_live_bytes: int    # most KV bytes alive at once

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _written(trace: Trace, out: str) -> TraceSummary:
    return TraceSummary(str(save(trace, out)), trace.counts(), int(trace.peak_live_bytes()))


def generate(cfg: GenerateConfig) -> TraceSummary:
    from kv_policy.generator import generate as gen

    return _written(gen(cfg.profile, cfg.seed, cfg.events), cfg.out)


def import_trace(cfg: ImportConfig) -> TraceSummary:
    from kv_policy.importers import import_prototype, import_requests

    if cfg.format == "prototype":
        return _written(import_prototype(cfg.inp), cfg.out)
    if not cfg.step_ms > 0:
        raise UserError("--step-ms must be positive")
    return _written(import_requests(cfg.inp, cfg.profile, cfg.seed, cfg.step_ms), cfg.out)
