"""`kvds policy import`: convert a prototype JSONL, a request trace or a Mooncake / Azure serving trace to a kvds
trace (.npz) and report what it holds (files no run). A bad line stops it before anything is written."""
from __future__ import annotations

from dataclasses import dataclass

from harness.results import Filed, StoredSummary
from kv_policy.generate_run import written
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.profiles import Profile


@dataclass(frozen=True)
class ImportConfig:
    trace: TraceOptions     # the file, its format and slice
    out: str
    profile: Profile        # how request traces are batched; the classes serving-trace priorities are drawn from
    seed: int               # batching seed; a serving trace's priority assignment


@dataclass(frozen=True)
class ImportSummary(StoredSummary):
    """What the written trace holds, and where it came from."""
    path: str               # the .npz written
    counts: dict[str, int]  # events by kind, decode-critical accesses, blocks and steps
    peak_live_bytes: int    # most KV bytes alive at once
    format: str             # the format read (named or detected)
    requests: int | None    # requests imported (None: a prototype event log)
    priorities: str | None  # who assigned priorities (a serving trace: kvds's rule and seed)


def run(cfg: ImportConfig) -> Filed[ImportSummary]:
    trace = load_trace(cfg.trace, cfg.profile, cfg.seed)
    return Filed(None, ImportSummary(*written(trace, cfg.out), cfg.trace.kind(), trace.meta.get("requests"),
                                     trace.meta.get("priorities")))
