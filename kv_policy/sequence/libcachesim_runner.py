"""The same block sequence through libCacheSim (the `libcachesim` Python package): written once as an
oracleGeneral binary trace (each request: time, id, size 1, index of the same block's next request), which its C
reader streams, so Belady sees the future the way kvds's MIN does."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kv_policy.sequence.belady import next_request

ORACLE_GENERAL = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])


@dataclass(frozen=True)
class Outcome:
    hit_ratio: float
    requests_per_s: float      # libCacheSim's own loop (process_trace), wall clock
    requests_per_cpu_s: float  # the same, per CPU second of this process (its loop runs in this thread)


def _classes() -> dict[str, type]:
    import libcachesim as lcs

    return {"LRU": lcs.LRU, "ARC": lcs.ARC, "S3-FIFO": lcs.S3FIFO, "MIN": lcs.Belady}


def version() -> str:
    from importlib.metadata import version as v

    return v("libcachesim")


class OracleTrace:
    """The sequence as a temporary oracleGeneral file, removed on exit."""

    def __init__(self, blocks: np.ndarray) -> None:
        self.blocks = blocks

    def __enter__(self) -> "OracleTrace":
        n = len(self.blocks)
        self.unique = int(np.unique(self.blocks).size)
        nxt = next_request(self.blocks)
        rec = np.zeros(n, dtype=ORACLE_GENERAL)
        rec["time"] = np.arange(n)
        rec["id"] = self.blocks.astype(np.int64) - int(self.blocks.min()) + 1  # libCacheSim ids start at 1
        rec["size"] = 1
        rec["next"] = np.where(nxt >= n, -1, nxt)  # -1: never again (the reader maps it to "infinitely far")
        self._dir = tempfile.TemporaryDirectory(prefix="kvds-lcs-")
        self.path = Path(self._dir.name) / "sequence.oracleGeneral.bin"
        rec.tofile(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()

    def run(self, algorithm: str, capacity: int) -> Outcome:
        import libcachesim as lcs

        reader = lcs.TraceReader(str(self.path), lcs.TraceType.ORACLE_GENERAL_TRACE)
        # a hash table sized to the sequence (libcachesim's default, 2^24 slots, costs more to allocate than a
        # short sequence takes to run, which would understate its requests/s)
        cache = _classes()[algorithm](capacity, hashpower=max(16, int(self.unique * 2).bit_length()))
        t0, c0 = time.perf_counter(), time.process_time()
        miss_ratio, _ = cache.process_trace(reader)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = len(self.blocks)
        return Outcome(1.0 - miss_ratio, n / wall if wall > 0 else float("inf"), n / cpu if cpu > 0 else float("inf"))
