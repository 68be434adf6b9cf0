"""Replay's simulated-vs-replayed figures (no root: a plan executed on a real file with O_DIRECT)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from kv_policy.replay import session as replay
from kv_policy import simulator as sim
from kv_policy.compare import Capacity
from kv_policy.generator import generate
from kv_policy.profiles import get_profile
from kv_policy.replay.execute import IoClasses, execute
from kv_policy.replay.slot_io import Background, SlotIO, fast_tier
from kernel_vm.arena import Arena
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from tests.policy.conftest import small_trace


@pytest.fixture(scope="module")
def trace():
    return small_trace("deadline_pressure", 2, 8, (16, 48), model="tinyllama-1.1b")


@contextmanager
def rig(work: dict, tmp_path: Path) -> Iterator[tuple[Arena, SlotIO, Background]]:
    """An arena, a slow-tier file opened O_DIRECT and a background thread, sized for every plan in `work`."""
    slot = max(pr.plan.slot_bytes for pr in work.values())
    backing = tmp_path / "slow.img"
    with open(backing, "wb") as fh:
        fh.truncate(max(pr.plan.slow_slots for pr in work.values()) * slot)
    try:
        dev = SlotIO(str(backing), slot)
    except OSError as exc:
        pytest.skip(f"O_DIRECT not supported under {tmp_path}: {exc}")
    arena, bg = fast_tier(max(pr.plan.arena_slots for pr in work.values()), slot), Background()
    try:
        yield arena, dev, bg
    finally:
        bg.close()
        arena.close()
        dev.close()


def test_recompute_time_per_step_matches_the_simulation(trace) -> None:
    work = replay.plan_all(trace, ["ExpectedNextUse", "LRU"], Capacity(0.3), DEFAULT_FAST, DEFAULT_SLOW)
    enu, lru = work["ExpectedNextUse"], work["LRU"]
    tiers = for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, Capacity(0.3).for_trace(trace))
    assert enu.recompute_us.size == enu.sim.step_latency_us.size
    ops = enu.sim.ops
    charged = (ops["op"] == sim.OP_RECOMPUTE) & (ops["charge"] == sim.DC_ACCESS)
    assert charged.any()
    expect = float(trace.block_size[ops["block"][charged]].sum() * tiers.recompute_us_per_byte)
    assert enu.recompute_us.sum() >= expect * (1 - 1e-9)
    assert lru.recompute_us.sum() == 0.0          # LRU never drops, so nothing is recomputed


def test_side_by_side_on_a_real_file(trace, tmp_path: Path) -> None:
    work = replay.plan_all(trace, ["ExpectedNextUse", "MIN"], Capacity(0.3), DEFAULT_FAST, DEFAULT_SLOW)
    with rig(work, tmp_path) as (arena, dev, bg):
        for pr in work.values():
            for _ in range(3):
                pr.runs.append(execute(pr.plan, arena, dev, bg, IoClasses(None, None, None)))
    for name, pr in work.items():
        row = replay.summary_row(pr)
        sim_stall = pr.sim.step_latency_us - pr.step_us
        assert row["sim_stall_p99_us"] == pytest.approx(np.percentile(sim_stall, 99))
        p99s = [np.percentile(r.step_latency_us + pr.recompute_us, 99) for r in pr.runs]
        assert row["real_stall_p99_us"]["value"] == pytest.approx(np.mean(p99s))
        assert row["real_stall_p99_us"]["lo"] <= row["real_stall_p99_us"]["value"] <= row["real_stall_p99_us"]["hi"]
        assert row["p99_ratio_real_to_sim"]["value"] == pytest.approx(np.mean([p / row["sim_stall_p99_us"]
                                                                                for p in p99s]))
        assert row["sim_slo"] == pytest.approx(float(pr.sim.slo_met().mean()))
        assert 0.0 <= row["real_slo"]["value"] <= 1.0, name


def test_paired_difference_by_repetition() -> None:
    rows = {"LRU": {"real_stall_p99_by_rep_us": [10.0, 12.0, 11.0]},
            "ExpectedNextUse": {"real_stall_p99_by_rep_us": [4.0, 7.0, 5.0]}}
    out = replay.versus(rows)["ExpectedNextUse"]
    est = out["difference_us"]
    assert est.value == pytest.approx(-17.0 / 3)
    assert est.lo < est.value < est.hi < 0
    ratio = out["ratio"]
    assert ratio.value == pytest.approx((4 / 10 * 7 / 12 * 5 / 11) ** (1 / 3))
    assert ratio.lo < ratio.value < ratio.hi < 1


def test_replay_idles_for_the_modelled_compute_between_steps(trace, tmp_path: Path) -> None:
    """Background I/O gets the compute window the simulator gives it: run_replay idles each policy's modelled
    compute per elapsed step (time.sleep never returns early, so the idle is at least that)."""
    from types import SimpleNamespace

    work = replay.plan_all(trace, ["ExpectedNextUse", "LRU"], Capacity(0.3), DEFAULT_FAST, DEFAULT_SLOW)
    with rig(work, tmp_path) as (arena, dev, bg):
        replay.run_replay(work, SimpleNamespace(arena=arena, dev=dev), IoClasses(None, None, None), 1)
        plain = execute(work["LRU"].plan, arena, dev, bg, IoClasses(None, None, None))
    assert plain.compute_idle_us == 0.0
    for pr in work.values():
        assert pr.step_us > 0
        elapsed_steps = int(pr.plan.step[-1] - pr.plan.step[0])
        assert pr.runs[0].compute_idle_us >= elapsed_steps * pr.step_us
