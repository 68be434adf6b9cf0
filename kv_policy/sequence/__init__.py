"""Cache policies on a plain block sequence (one request per block, every block of size 1): what a cache simulator
such as libCacheSim runs, and what `kvds policy crosscheck` compares against it. One algorithm per module; each
exposes `hits(seq, capacity) -> int` (the number of requests that hit)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from kv_policy.sequence import arc, belady, lru, s3fifo, vllm_offload_arc

ALGORITHMS: dict[str, Callable[[np.ndarray, int], int]] = {
    "LRU": lru.hits,
    "ARC": arc.hits,
    "S3-FIFO": s3fifo.hits,
    "MIN": belady.hits,
}
# The offload tiers' own variants, which libCacheSim does not run (LMCache's and vLLM's offload LRU is `lru`).
ENGINE_ALGORITHMS: dict[str, Callable[[np.ndarray, int], int]] = {
    "vLLM-offload-ARC": vllm_offload_arc.hits,
}
