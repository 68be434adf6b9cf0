"""Belady's MIN on a plain block sequence: every miss is cached, and the block whose next request is furthest away
(never requested again first) makes room. With blocks of one size this is the fewest misses any demand cache
achieves, whatever the tie-break among blocks never requested again."""
from __future__ import annotations

import heapq

import numpy as np


def next_request(seq: np.ndarray) -> np.ndarray:
    """Per request: the index of the same block's next request, or len(seq) when there is none."""
    n = len(seq)
    out = np.full(n, n, dtype=np.int64)
    last: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        b = int(seq[i])
        out[i] = last.get(b, n)
        last[b] = i
    return out


def hits(seq: np.ndarray, capacity: int) -> int:
    """Requests of `seq` that hit a MIN cache of `capacity` blocks."""
    nxt = next_request(seq).tolist()
    resident: dict[int, int] = {}            # block -> its next request (the heap entry that is live)
    heap: list[tuple[int, int]] = []         # (-next request, block), lazy deletion
    n_hit = 0
    for i, b in enumerate(seq.tolist()):
        if b in resident:
            n_hit += 1
        elif capacity <= 0:
            continue
        elif len(resident) >= capacity:
            while True:
                neg, v = heapq.heappop(heap)
                if resident.get(v) == -neg:
                    del resident[v]
                    break
        resident[b] = nxt[i]
        heapq.heappush(heap, (-nxt[i], b))
    return n_hit
