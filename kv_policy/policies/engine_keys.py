"""The engine rows' keys for every event at once (compiled), for the simulator's compiled loop: the same values
`EngineRelease.on_event` and `key` produce one event at a time, since a block's reference state, release run and
node priority follow from the events alone. A key (a, p, g, -r) is carried as two floats: a x 1000 + p, and
g x 2^16 - r (exact below 2^37 events and runs of 2^16 releases)."""
from __future__ import annotations

import numpy as np
from kv_policy.jit import njit

from kv_policy import codes

RELEASE_ORDER, NODE_PRIORITY, RETENTION = 0, 1, 2   # vLLM / SGLang LRU; SGLang priority; TensorRT-LLM retention
RANK_SCALE = 65536.0


@njit
def _keys(kinds, blocks, crits, cls, owner, priority, mode, unref_a, unref_b):
    n = kinds.shape[0]
    ka = np.empty(n, dtype=np.float64)
    kb = np.empty(n, dtype=np.float64)
    node = priority.astype(np.int64)
    admitting = -1
    prev_i, prev_kind, group, rank = -2, -1, 0, 0
    for i in range(n):
        k, b = kinds[i], blocks[i]
        if mode == NODE_PRIORITY:
            if k == codes.ALLOC and owner[b] >= 0:
                admitting = priority[b]
            elif k == codes.ACCESS and not crits[i] and admitting > node[b]:
                node[b] = admitting
        release = k == codes.HINT and (cls[i] == unref_a or cls[i] == unref_b)
        if release or k == codes.ACCESS:
            if prev_i == i - 1 and prev_kind == k:
                rank += 1
            else:
                group, rank = i, 0
            prev_i, prev_kind = i, k
        if release:
            p = 0.0
            if mode == NODE_PRIORITY:
                p = float(node[b])
            elif mode == RETENTION:
                p = float(priority[b])
            ka[i] = p
            kb[i] = group * RANK_SCALE - rank
        else:
            ka[i] = 1000.0
            kb[i] = i * RANK_SCALE
    return ka, kb


def event_keys(trace, mode: int) -> np.ndarray:
    """(2, events): the two parts of each event's key."""
    ka, kb = _keys(trace.kind.astype(np.uint8), trace.block.astype(np.int64), trace.critical.astype(np.bool_),
                   trace.cls.astype(np.uint8), trace.block_request.astype(np.int64),
                   trace.block_priority.astype(np.int64), mode, codes.COLD_SPILLABLE, codes.DONE)
    return np.stack([ka, kb])
