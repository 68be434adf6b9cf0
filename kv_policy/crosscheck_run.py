"""`kvds policy crosscheck`: kvds's LRU, ARC, S3-FIFO and MIN against libCacheSim's on one plain block sequence
(kv_policy/sequence/), at capacities given as shares of the sequence's unique blocks. A hit ratio that differs by
more than the tolerance means one of the two simulators does not run the algorithm it names."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from harness.errors import UserError
from harness.results import Filed, ResultStore, StoredSummary
from kv_policy.sequence import ALGORITHMS, ENGINE_ALGORITHMS, libcachesim_runner, source

SCHEMA = "kvds.policy-crosscheck/1"
DEFAULT_CAPACITIES = (0.01, 0.05, 0.10, 0.25)
TOLERANCE = 0.001
RATE = {"unit": "requests/s"}
MIN_BLOCKS = 20  # libCacheSim's S3-FIFO aborts the process when its small FIFO (10%) is under 2 blocks


@dataclass(frozen=True)
class CrosscheckConfig:
    trace: str | None = None                         # Mooncake JSONL or kvds .npz; None: a generated sequence
    capacities: tuple[float, ...] = DEFAULT_CAPACITIES  # shares of the unique blocks
    tolerance: float = TOLERANCE


@dataclass(frozen=True)
class CrosscheckRow(StoredSummary):
    """One algorithm at one capacity, both simulators."""
    algorithm: str                       # LRU, ARC, S3-FIFO, MIN
    capacity_share: float                # of the unique blocks
    capacity_blocks: int                 # floor(share x unique blocks)
    kvds_hit_ratio: float                # hits per request, kvds (kv_policy/sequence/)
    libcachesim_hit_ratio: float         # hits per request, libCacheSim
    difference: float                    # |kvds - libCacheSim|
    kvds_requests_per_s: float = field(metadata=RATE)         # kvds's plain-sequence loop, wall clock
    libcachesim_requests_per_s: float = field(metadata=RATE)  # libCacheSim's process_trace, wall clock

    STRICT = False


@dataclass(frozen=True)
class CrosscheckSummary(StoredSummary):
    """summary.json of a `policy-crosscheck` run."""
    schema: str                          # "kvds.policy-crosscheck/1"
    source: str                          # where the sequence came from
    requests: int                        # blocks in the sequence
    unique_blocks: int                   # distinct blocks
    libcachesim_version: str             # the `libcachesim` package version compared against
    tolerance: float                     # largest difference that counts as agreement
    rows: list[dict[str, Any]]           # per algorithm and capacity, key by key in policy.crosscheck.rows
    agree: bool                          # every row's difference within the tolerance
    engine_rows: list[dict[str, Any]] | None = None  # kvds only (no libCacheSim counterpart): per capacity,
    #                                      algorithm, capacity_share, capacity_blocks, kvds_hit_ratio

    OMIT_WHEN_NONE = ("engine_rows",)


def run(cfg: CrosscheckConfig) -> Filed[CrosscheckSummary]:
    seq = source.load(cfg.trace)
    unique = seq.unique
    rows: list[CrosscheckRow] = []
    for share in cfg.capacities:
        if int(unique * share) < MIN_BLOCKS:
            raise UserError(f"capacity {share:g} of {unique} unique blocks is {int(unique * share)} blocks: the "
                            f"cross-check needs at least {MIN_BLOCKS} (libCacheSim's S3-FIFO aborts below that)")
    with libcachesim_runner.OracleTrace(seq.blocks) as lcs_trace:
        for share in cfg.capacities:
            cap = int(unique * share)
            for name, hits in ALGORITHMS.items():
                t0 = time.perf_counter()
                ours = hits(seq.blocks, cap) / len(seq.blocks)
                wall = time.perf_counter() - t0
                theirs = lcs_trace.run(name, cap)
                rows.append(CrosscheckRow(name, share, cap, ours, theirs.hit_ratio, abs(ours - theirs.hit_ratio),
                                          len(seq.blocks) / wall if wall > 0 else float("inf"),
                                          theirs.requests_per_s))
    engine_rows = [{"algorithm": name, "capacity_share": share, "capacity_blocks": int(unique * share),
                    "kvds_hit_ratio": hits(seq.blocks, int(unique * share)) / len(seq.blocks)}
                   for share in cfg.capacities for name, hits in ENGINE_ALGORITHMS.items()]
    summary = CrosscheckSummary(SCHEMA, seq.source, len(seq.blocks), unique, libcachesim_runner.version(),
                                cfg.tolerance, [r.as_dict() for r in rows],
                                all(r.difference <= cfg.tolerance for r in rows), engine_rows)
    filed = ResultStore().new_run("policy-crosscheck", {"trace": cfg.trace, "capacities": list(cfg.capacities),
                                                        "tolerance": cfg.tolerance})
    stored = summary.as_dict()
    filed.write_summary(stored)
    return Filed(filed, CrosscheckSummary.from_json(stored))
