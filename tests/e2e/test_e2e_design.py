"""kvds e2e's design without kernel state: the intent schedule (which slot gets which madvise, when), the factorial
arithmetic (main effects, interaction, paired goals), the dry run (plan, knobs, every command; nothing changed) and
bad input (one line, exit 2)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from harness.intent import IntentClass
from harness.mapping import MADVISE_ADVICE, load_mapping
from kv_policy import codes
from kv_policy import simulator as sim
from kv_policy.replay.plan import Plan
from kv_policy.trace import Trace
from e2e import figures, intents
from e2e.cells import cells
from tests.conftest import run_kvds

DC, COLD, WARM = (codes.CLASS_BY_NAME[c.value] for c in (IntentClass.DECODE_CRITICAL, IntentClass.COLD_SPILLABLE,
                                                          IntentClass.WARM))


def _trace() -> Trace:
    """Block 0: allocated warm at step 0, read decode-critical at step 1, hinted cold at step 2. Block 1: allocated
    cold at step 0, never read critically."""
    step = np.array([0, 0, 1, 2], dtype=np.int64)
    kind = np.array([codes.ALLOC, codes.ALLOC, codes.ACCESS, codes.HINT], dtype=np.uint8)
    block = np.array([0, 1, 0, 0], dtype=np.int32)
    crit = np.array([False, False, True, False])
    cls = np.array([WARM, COLD, 0, COLD], dtype=np.uint8)
    n = 2
    return Trace(step, kind, block, crit, cls, np.full(n, 4096, dtype=np.int64), np.zeros(n, dtype=np.int32),
                 np.full(n, 80, dtype=np.uint8), np.full(n, 5e4))


def _plan() -> Plan:
    """Alloc both at step 0 (slots 0, 1), hit block 0 at step 1, spill block 1 at step 2, free block 0 at step 3."""
    op = np.array([sim.OP_ALLOC, sim.OP_ALLOC, sim.OP_HIT, sim.OP_SPILL_SYNC, sim.OP_FREE], dtype=np.uint8)
    return Plan(np.array([0, 0, 1, 2, 3]), op, np.array([0, 1, 0, 1, 0], dtype=np.int32), np.zeros(5, np.uint8),
                np.array([0, 1, 0, 1, 0]), np.array([-1, -1, -1, 0, -1]), np.full(5, 4096), 4096, 2, 1)


def test_each_slot_gets_the_advice_of_its_new_class_at_the_step_it_changes() -> None:
    tr, plan = _trace(), _plan()
    assert intents.op_classes(plan, tr).tolist() == [WARM, COLD, DC, COLD, codes.CLASS_BY_NAME["done"]]
    sched = intents.schedule(plan, tr, load_mapping("stack"))
    as_lists = {s: sorted((a, v.tolist()) for a, v in calls) for s, calls in sched.items()}
    # step 0: slot 1 became cold (slot 0 warm: the mapping gives warm no advice); step 1: slot 0 decode-critical;
    # step 2: slot 1 spilled, still cold (no change, no call); step 3: slot 0 freed (done: cold in this mapping)
    assert as_lists == {0: [(MADVISE_ADVICE["MADV_COLD"], [1])], 1: [(MADVISE_ADVICE["MADV_WILLNEED"], [0])],
                        3: [(MADVISE_ADVICE["MADV_COLD"], [0])]}
    assert intents.schedule(plan, tr, load_mapping("none")) == {}
    assert intents.count(sched) == {"MADV_COLD": 2, "MADV_WILLNEED": 1}
    intent = intents.schedule(plan, tr, load_mapping("intent"))  # the default mapping: done is MADV_DONTNEED
    assert [(a, v.tolist()) for a, v in intent[3]] == [(MADVISE_ADVICE["MADV_DONTNEED"], [0])]


def _cells(values: dict[str, list[float]]) -> dict[str, dict]:
    return {name: {"per_rep": [{"p99_us": v, "slo_high": 0.5, "goodput": 100.0} for v in vs]}
            for name, vs in values.items()}


def test_main_effects_and_interaction_are_the_factorial_contrasts() -> None:
    grid = cells("LRU", "ExpectedNextUse")
    ln, li, kn, ki = (c.name for c in grid)
    # ms: reference 10, intents alone 8, policy alone 7, both 4 (interaction (4-7)-(8-10) = -1)
    c = _cells({ln: [10e3, 10e3, 10e3], li: [8e3, 8e3, 8e3], kn: [7e3, 7e3, 7e3], ki: [4e3, 4e3, 4e3]})
    e = figures.effects(c, grid)["tpot_p99_ms"]
    assert math.isclose(e["policy"]["value"], -3.5) and math.isclose(e["mechanisms"]["value"], -2.5)
    assert math.isclose(e["interaction"]["value"], -1.0) and math.isclose(e["whole_stack"]["value"], -6.0)


def test_goals_are_judged_by_the_whole_interval() -> None:
    grid = cells("LRU", "ExpectedNextUse")
    ln, li, kn, ki = (c.name for c in grid)
    met = _cells({ln: [10e3, 11e3, 10.5e3], li: [1] * 3, kn: [1] * 3, ki: [5e3, 5.4e3, 5.2e3]})
    assert figures.goals(met, grid)["tpot_p99_ratio"]["status"] == "met"
    missed = _cells({ln: [10e3, 11e3, 10.5e3], li: [1] * 3, kn: [1] * 3, ki: [9e3, 10e3, 9.6e3]})
    g = figures.goals(missed, grid)
    assert g["tpot_p99_ratio"]["status"] == "missed" and "goal TPOT p99 ratio <= 0.6" in g["tpot_p99_ratio"]["line"]
    assert g["slo_high_gain_points"]["status"] == "missed"  # no gain at all: the interval is [0, 0]
    two = _cells({ln: [10e3, 11e3], li: [1] * 2, kn: [1] * 2, ki: [5e3, 5.4e3]})
    assert figures.goals(two, grid)["tpot_p99_ratio"]["status"] == "inconclusive"  # 2 reps: a point estimate


def test_dry_run_prints_the_plan_knobs_and_commands_and_changes_nothing(tmp_path: Path,
                                                                         kvds_env: dict[str, str]) -> None:
    res = run_kvds(["e2e", "--dry-run", "--steps", "40", "--reps", "2", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    env = json.loads(res.stdout)
    assert env["run"] is None and env["summary"]["schema"] == "kvds.e2e-plan/1"
    plan = env["summary"]
    names = plan["cells"]
    assert names == ["LRU / no intents", "LRU / intents", "ExpectedNextUse / no intents", "ExpectedNextUse / intents"]
    assert [tuple(x) for x in plan["order"]] == [(0, n) for n in names] + [(1, n) for n in reversed(names)]
    assert plan["trace"]["steps"] == 40 and plan["trace"]["block_bytes"] == 16384
    assert plan["mapping"]["classes"]["cold-spillable"]["spill_pacing"] == "deadline"
    writers = [c for c in plan["commands"] if c["what"] == "spill tenant"]
    # one unmeasured warm-up repetition of the reference cell, then the eight measured ones
    assert plan["warmup"] == 1 and [(c["rep"], c["cell"]) for c in writers][0] == (-1, "LRU / no intents")
    assert len(writers) == 9
    # every repetition gets a fresh squeezed group and arena, limited below the arena; the guest timeout is stated
    assert any(c["what"].startswith("per cell repetition: a fresh memory cgroup") for c in plan["commands"])
    assert 0 < plan["sizes"]["memcg_limit_bytes"] < plan["sizes"]["arena_bytes"]
    assert plan["guest_timeout_s"] >= 1800
    for c in writers:
        argv = c["argv"]
        assert argv[1] == "writer" and argv[argv.index("--dev") + 1] == "<loop device>"
        paced = "--pace" in argv and argv[argv.index("--pace") + 1] == "deadline"
        assert paced == c["cell"].endswith("/ intents"), c
        assert (argv[argv.index("--prio") + 1] == "-1") != paced  # default priority without intents, be/7 with
    assert any(c["what"].startswith("memory hog") for c in plan["commands"])
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
    text = run_kvds(["e2e", "--dry-run", "--steps", "40", "--reps", "1"], kvds_env, timeout=120)
    assert text.returncode == 0 and "nothing was set up or started (--dry-run)" in text.stdout
    assert "cold-spillable: madvise=['MADV_COLD']" in text.stdout


def test_bad_input_is_one_line_exit_2(kvds_env: dict[str, str]) -> None:
    for args, words in ((["--squeeze", "1.5"], "--squeeze"), (["--policy", "LRU"], "--baseline and --policy"),
                        (["--mapping", "nosuch"], "unknown mapping"), (["--trace", "/nonexistent.jsonl"], "does not")):
        p = run_kvds(["e2e", "--dry-run", *args], kvds_env, timeout=60)
        assert p.returncode == 2 and words in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)


def _prepared(steps: int):
    from harness.cli import build_parser
    from e2e import cli, e2e_run

    cfg = cli.config(build_parser().parse_args(["e2e", "--dry-run", "--steps", str(steps)]))
    prep, _, _ = e2e_run._prepare(cfg)
    return cfg, prep


def test_the_calibrated_prediction_prices_each_op_at_the_median_the_run_measured() -> None:
    cfg, prep = _prepared(150)
    pr = prep.work[cfg.baseline]
    nbytes = int(pr.plan.nbytes.max(initial=0))
    modelled = figures.modelled_op_us(prep.tiers, nbytes)
    # measured exactly as modelled: the calibrated rerun is the simulator's own prediction
    same = figures.calibrated_prediction(prep.trace, cfg.baseline, prep.tiers, modelled, nbytes)
    assert same["tpot_p99_us"] == float(np.percentile(pr.sim.step_latency_us, 99))
    for op, us in modelled.items():
        assert math.isclose(same["op_us"][op], us)
    # a slower synchronous spill write and miss, as measured beside the spill tenant: the prediction takes them
    slow = dict(modelled, **{"spill-sync": modelled["spill-sync"] + 500.0, "miss": modelled["miss"] + 500.0})
    cal = figures.calibrated_prediction(prep.trace, cfg.baseline, prep.tiers, slow, nbytes)
    assert math.isclose(cal["op_us"]["spill-sync"], slow["spill-sync"])
    assert math.isclose(cal["op_us"]["miss"], slow["miss"])
    assert cal["tpot_p99_us"] > same["tpot_p99_us"]
