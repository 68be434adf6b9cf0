"""The rows modelled from serving engines (kv_policy/policies/: vLLM, SGLang, TensorRT-LLM) on a hand-built trace
whose eviction order is worked out by hand from each engine's rule."""
from __future__ import annotations

import numpy as np
import pytest

from kv_policy import codes
from kv_policy.registry import ENGINE_ROWS, engine_of, is_reference, make_policy, parse_policies
from kv_policy.simulator import OP_DROP, OP_EVICT_CLEAN, OP_SPILL_BG, OP_SPILL_SYNC, simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, TierModel
from kv_policy.trace import Trace

SZ = 4096
A0, A1, B0, B1, R0, R1, FILLER, N0, N1, N2, N3, N4 = range(12)  # documents A and B (two blocks each), own blocks
OWNER = [-1, -1, -2, -2, 0, 1, 3, 2, 2, 2, 2, 2]
# Request 0 (priority 90) reads document A, request 1 (priority 10) reads document B. Document A's own retention
# priority is 10 (TensorRT-LLM's lowest), B's 35 (its default). FILLER is read every step (always referenced).
PRIORITY = [10, 10, 35, 35, 90, 10, 50, 50, 50, 50, 50, 50]
FAST_BLOCKS = 7  # everything up to step 1 fits


def events() -> list[tuple[int, int, int, bool, int]]:
    """(step, kind, block, critical, class): A is released at step 2 before B; a new request allocates five blocks
    at step 5 beside the five live ones in a seven-block fast tier, so three blocks must go."""
    ev = [(0, codes.ALLOC, b, False, codes.WARM) for b in (A0, A1)]
    ev += [(0, codes.ALLOC, R0, False, codes.RECOMPUTE_OK), (0, codes.ALLOC, FILLER, False, codes.DECODE_CRITICAL)]
    ev += [(0, codes.ACCESS, b, False, 0) for b in (A0, A1, R0)]
    ev += [(1, codes.ALLOC, b, False, codes.WARM) for b in (B0, B1)] + [(1, codes.ALLOC, R1, False, codes.RECOMPUTE_OK)]
    ev += [(1, codes.ACCESS, b, False, 0) for b in (B0, B1, R1)]
    ev += [(2, codes.FREE, R0, False, 0)] + [(2, codes.HINT, b, False, codes.COLD_SPILLABLE) for b in (A0, A1)]
    ev += [(2, codes.FREE, R1, False, 0)] + [(2, codes.HINT, b, False, codes.COLD_SPILLABLE) for b in (B0, B1)]
    ev += [(s, codes.ACCESS, FILLER, True, 0) for s in (3, 4)]
    ev += [(5, codes.ALLOC, b, False, codes.DECODE_CRITICAL) for b in (N0, N1, N2, N3, N4)]
    return ev


def trace() -> Trace:
    ev = events()
    t = Trace(np.array([e[0] for e in ev], dtype=np.int64), np.array([e[1] for e in ev], dtype=np.uint8),
              np.array([e[2] for e in ev], dtype=np.int32), np.array([e[3] for e in ev], dtype=bool),
              np.array([e[4] for e in ev], dtype=np.uint8), np.full(len(OWNER), SZ, dtype=np.int64),
              np.array(OWNER, dtype=np.int32), np.array(PRIORITY, dtype=np.uint8), np.full(len(OWNER), 100_000.0))
    t.validate()
    return t


def evictions(spec: str, fast: bool) -> list[int]:
    name, _, rest = spec.partition(":")
    params = {k: float(v) for k, v in (kv.split("=") for kv in rest.split(":") if kv)}
    res = simulate(trace(), make_policy(name, **params), TierModel(DEFAULT_FAST, DEFAULT_SLOW, FAST_BLOCKS * SZ),
                   record=True, fast=fast)
    assert res.ops is not None
    out = np.isin(res.ops["op"], (OP_SPILL_SYNC, OP_SPILL_BG, OP_DROP, OP_EVICT_CLEAN))
    return res.ops["block"][out].tolist()


@pytest.mark.parametrize("spec,order", [
    ("LRU", [A0, A1, B0]),                            # least recently read, whatever was released
    ("vLLM-prefix", [A1, A0, B1]),                    # free-queue order: A released first, its tail first
    ("SGLang-radix", [A1, A0, B1]),                   # last access = release; leaves (tails) first
    ("SGLang-priority", [B1, B0, A1]),                # A's node priority is max(10, request 0's 90): B goes first
    ("TRTLLM-retention", [A1, A0, B1]),               # A's retention 10 < B's 35
    ("TRTLLM-retention:duration_steps=1", [B1, B0, A1]),  # A's 10 lapses after step 3: re-filed at 35 behind B
])
@pytest.mark.parametrize("fast", [True, False])   # the compiled loop and the Python one
def test_eviction_order_worked_out_by_hand(spec: str, order: list[int], fast: bool) -> None:
    assert evictions(spec, fast) == order


def test_a_read_references_a_released_block_again() -> None:
    t = trace()
    i = int(np.flatnonzero((t.kind == codes.ACCESS) & (t.block == FILLER))[-1])   # step 4's read of FILLER
    t.block[i] = A1   # request reads A1 at step 4 instead (a prefix hit): A1 is referenced, so A0 then B go first
    t.critical[i] = True
    res = simulate(t, make_policy("vLLM-prefix"), TierModel(DEFAULT_FAST, DEFAULT_SLOW, FAST_BLOCKS * SZ), record=True)
    assert res.ops is not None
    out = np.isin(res.ops["op"], (OP_SPILL_SYNC, OP_SPILL_BG))
    assert res.ops["block"][out].tolist() == [A0, B1, B0]


def test_engine_rows_are_registered_online_rows_with_their_engine() -> None:
    names = parse_policies("engines")
    assert names == [cls.name for cls in ENGINE_ROWS]
    for cls in ENGINE_ROWS:
        assert not is_reference(cls.name) and engine_of(cls.name) and cls.name not in parse_policies("all")
    assert engine_of("LRU") == "" and engine_of("MIN") == ""
