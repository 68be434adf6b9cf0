"""Replay plans and their execution on a real file with O_DIRECT (no root needed)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kv_policy import simulator as sim
from kv_policy.registry import make_policy
from kv_policy.profiles import get_profile
from kv_policy.replay.execute import IoClasses, execute
from kv_policy.replay.slot_io import Background, SlotIO, fast_tier
from kv_policy.replay.plan import make_plan
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from tests.policy.conftest import small_trace

POLICIES = ["LRU", "PredictiveHotness", "DeadlineAware", "ExpectedNextUse", "MIN"]


def _trace():
    return small_trace("balanced", 1, 6, (16, 48), model="tinyllama-1.1b")


def _plan(name: str):
    t = _trace()
    tiers = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, t.peak_live_bytes() // 3)  # budget and recompute priced
    res = sim.simulate(t, make_policy(name), tiers, record=True)
    return t, tiers, res, make_plan(res.ops, t.block_size)


@pytest.mark.parametrize("name", POLICIES)
def test_plan_never_shares_a_slot_and_fits_the_fast_tier(name: str) -> None:
    t, tiers, res, plan = _plan(name)
    assert plan.arena_slots * int(t.block_size.max()) <= tiers.fast_capacity
    owner_arena: dict[int, int] = {}
    for op, b, a in zip(plan.op.tolist(), plan.block.tolist(), plan.arena.tolist()):
        if op in (sim.OP_ALLOC, sim.OP_MISS, sim.OP_PREFETCH, sim.OP_RECOMPUTE):
            assert owner_arena.get(a, b) == b, "two resident blocks in one arena slot"
            owner_arena[a] = b
        elif op in (sim.OP_SPILL_SYNC, sim.OP_SPILL_BG, sim.OP_DROP, sim.OP_EVICT_CLEAN) or \
                (op == sim.OP_FREE and a >= 0):  # evict-clean: the kept slow-tier copy, no write, slot free
            assert owner_arena.pop(a) == b
    counts = np.bincount(plan.op, minlength=9)
    assert counts[sim.OP_MISS] + counts[sim.OP_RECOMPUTE] == res.misses
    assert counts[sim.OP_PREFETCH] == res.prefetches
    assert counts[sim.OP_SPILL_SYNC] + counts[sim.OP_SPILL_BG] == res.spills
    assert (counts[sim.OP_DROP], counts[sim.OP_RECOMPUTE]) == (res.drops, res.recomputes)
    if name == "ExpectedNextUse":  # it drops recompute-ok prompt blocks: the plan must carry both ops
        assert res.drops > 0 and res.recomputes > 0


@pytest.mark.parametrize("name", POLICIES)
def test_execution_on_a_real_file_keeps_block_contents(name: str, tmp_path: Path) -> None:
    """Every block that went to the slow tier and came back holds the bytes it was written with."""
    t, _, res, plan = _plan(name)
    backing = tmp_path / "slow.img"
    with open(backing, "wb") as fh:
        fh.truncate(plan.slow_slots * plan.slot_bytes)
    try:
        dev = SlotIO(str(backing), plan.slot_bytes)
    except OSError as exc:
        pytest.skip(f"O_DIRECT not supported under {tmp_path}: {exc}")
    arena, bg = fast_tier(plan.arena_slots, plan.slot_bytes), Background()
    try:
        run = execute(plan, arena, dev, bg, IoClasses(None, None, None))
        stamp, where = {}, {}
        for i, (op, b, a) in enumerate(zip(plan.op.tolist(), plan.block.tolist(), plan.arena.tolist())):
            if op == sim.OP_ALLOC and b not in stamp:
                stamp[b] = i
            if op == sim.OP_RECOMPUTE:  # produced again: its contents are the recompute's
                stamp[b] = i
            if op in (sim.OP_ALLOC, sim.OP_MISS, sim.OP_PREFETCH, sim.OP_RECOMPUTE):
                where[b] = a
            elif op in (sim.OP_SPILL_SYNC, sim.OP_SPILL_BG, sim.OP_FREE, sim.OP_DROP):
                where.pop(b, None)
        for b, a in where.items():
            got = int.from_bytes(arena.map[a * plan.slot_bytes:a * plan.slot_bytes + 8], "little")
            assert got == stamp[b], f"block {b} lost its contents"
    finally:
        bg.close()
        arena.close()
        dev.close()
    assert run.step_latency_us.size == res.step_latency_us.size
    assert len(run.op_us["miss"]) + len(run.op_us["recompute"]) == res.misses


def test_a_replay_given_its_columns_and_timings_allocates_next_to_nothing(tmp_path: Path) -> None:
    """e2e replays inside a squeezed memory group; with the plan's columns and the timing buffers made before
    (Columns.of, Timings.of), the loop itself must not allocate per op. Without them it allocates the columns and a
    float per op: about 90 bytes per op here. Measured with tracemalloc over the whole execute call."""
    import tracemalloc

    from kv_policy.replay.execute import Columns, Timings

    _, _, res, plan = _plan("ExpectedNextUse")
    backing = tmp_path / "slow.img"
    with open(backing, "wb") as fh:
        fh.truncate(plan.slow_slots * plan.slot_bytes)
    dev = SlotIO(str(backing), plan.slot_bytes)
    arena, bg = fast_tier(plan.arena_slots, plan.slot_bytes), Background()
    try:
        execute(plan, arena, dev, bg, IoClasses(None, None, None))  # the threads' stages and the pool warmed up
        peaks = {}
        for given in (False, True):
            cols, timings = (Columns.of(plan), Timings.of(plan)) if given else (None, None)
            tracemalloc.start()
            run = execute(plan, arena, dev, bg, IoClasses(None, None, None), cols=cols, timings=timings)
            peaks[given] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert run.step_latency_us.size == res.step_latency_us.size
            assert np.isfinite(run.op_dt_us).all() and run.op_dt_us.size == len(plan)
    finally:
        bg.close()
        arena.close()
        dev.close()
    assert peaks[False] - peaks[True] > 50 * len(plan), peaks   # the columns and a float per op, made in the call
    # given them: pending-I/O bookkeeping and one block's transient copy at most, whatever the number of ops
    assert peaks[True] < 64 * 1024 + 2 * plan.slot_bytes, peaks
