"""The sweep's auto-grow rule (--until-width, --time-cap) and its default size, from constructed points; and a real
sweep that records its rounds and continues the ABBA alternation across them."""

from __future__ import annotations

import json

from harness import doctor
from io_priority import auto_grow, goal, sweep_run
from tests.conftest import run_kvds


def _pt(sched: str, variant: str, lo: float, hi: float) -> dict:
    e = {"value": (lo * hi) ** 0.5, "lo": lo, "hi": hi, "conf": 0.95}
    return {"scheduler": sched, "variant": variant, "interference_service": e, "interference_factor": e}


def test_grow_adds_reps_only_to_points_whose_inconclusive_interval_is_wide() -> None:
    g = auto_grow.Grow(width=2.0, time_cap_s=100.0)
    pts = [_pt("mq", "baseline", 0.5, 9.0),   # the reference: never judged, never grown for
           _pt("mq", "a", 1.0, 1.4),          # met: decided
           _pt("mq", "b", 2.0, 30.0),         # missed though wide: decided
           _pt("bfq", "c", 0.8, 4.0),         # inconclusive and 5x wide: more repetitions, with bfq's reference
           _pt("bfq", "d", 1.0, 1.3)]         # decided: not re-run though its scheduler grows
    step = auto_grow.grow_step(pts, g, elapsed_s=20.0, variant_reps_done=16)
    assert step["more"] == {"bfq": ["unloaded", "c"]} and step["wide"] == {"bfq": ["c"]} and step["step"] == 2
    pts[3] = _pt("bfq", "c", 1.2, 1.9)  # inconclusive but narrower than 2x: the interval is as tight as asked
    assert auto_grow.grow_step(pts, g, 20.0, 16)["more"] == {}


def test_grow_stops_before_a_round_that_would_pass_the_cap() -> None:
    g = auto_grow.Grow(width=2.0, time_cap_s=100.0)
    pts = [_pt("mq", "c", 0.8, 4.0), _pt("mq", "e", 0.7, 5.0)]
    # 80 s for 16 variant-repetitions (5 s each): the next round is 2 x (unloaded, c, e) = 30 s, 110 > 100
    step = auto_grow.grow_step(pts, g, elapsed_s=80.0, variant_reps_done=16)
    assert step["more"] == {} and "time cap 100 s" in step["stop"] and "mq/c" in step["stop"]
    # one wide point: 2 x (unloaded, c) = 20 s, ends at exactly 100 s: it runs
    assert auto_grow.grow_step(pts[:1], g, 80.0, 16)["more"] == {"mq": ["unloaded", "c"]}
    assert auto_grow.grow_step(pts, None, 1.0, 4)["more"] == {}


def test_goal_judged_on_service_time_with_end_to_end_beside_it() -> None:
    p = _pt("mq", "a", 1.0, 1.4)
    p["interference_e2e_stall_free"] = {"value": 3.0, "lo": 2.0, "hi": 4.0, "conf": 0.95}
    p["spill_retained_est"] = {"value": 0.7, "lo": 0.6, "hi": 0.8, "conf": 0.95}
    goal.judge([p], None)
    assert p["goal"]["status"] == "met" and p["goal"]["parts"][0]["goal"].startswith("service-time interference")
    assert p["end_to_end"]["status"] == "missed"
    assert auto_grow.interval_width({"lo": 2.0, "hi": 5.0}) == 2.5 and auto_grow.interval_width({"lo": None}) is None


def test_default_sweep_plan_and_size() -> None:
    from io_priority.cli import sweep_plan

    assert sweep_run.DEFAULT_PLAN["mq-deadline"] == ("ioprio-only", "throttle-only", "intent-paced", "spill-v2")
    assert sweep_run.DEFAULT_PLAN["bfq"] == ("ioprio-only",)  # bfq as the comparator; its pacer points documented apart
    assert sweep_run.DEFAULT_REPS >= 3  # an interval over repetitions needs 3
    assert sweep_plan(None, None) == {s: list(ms) for s, ms in sweep_run.DEFAULT_PLAN.items()}
    # naming either axis gives the full grid, the default filling the other
    assert sweep_plan(["bfq"], None) == {"bfq": list(sweep_run.DEFAULT_MAPPINGS)}
    assert sweep_plan(None, ["spill-v2"]) == {"mq-deadline": ["spill-v2"], "bfq": ["spill-v2"]}
    quick = {s: list(sweep_run.QUICK_MAPPINGS) for s in sweep_run.DEFAULT_SCHEDULERS}
    assert sweep_plan(None, None, quick=True) == quick


def test_reference_spread_does_not_grow_with_the_number_of_repetitions() -> None:
    """max / min of k repetitions grows with k; the judged typical pair spread does not: the same six values
    repeated (12 repetitions, same dispersion) keep it about where it was, and a reference that moved 4x fails."""
    six = [300.0, 340.0, 380.0, 290.0, 360.0, 330.0]
    one, two = goal.typical_pair_spread(six), goal.typical_pair_spread(six + six)
    assert one < 1.5 and abs(two - one) / one < 0.05
    assert goal.typical_pair_spread([100.0, 400.0, 110.0]) > 1.5
    per = {"s": {"modes": {"unloaded": {"per_rep_service_p99_us": [271.0, 494.0] + six}}}}  # max/min 1.82
    v = goal.reference_stability(per)["s"]
    assert v.status == "met" and "max/min 1.82" in v.reason
    g = goal.goal_summary([], per)
    assert abs(g["unloaded_p99_spread"]["s"] - 494 / 271) < 1e-9 and g["unloaded_pair_spread"]["s"] < 1.5


@doctor.skip_unless("loop", "ioprio", "ioprio.rt", "ioprio.idle")
@doctor.skip_unless("root")
def test_sweep_records_its_rounds_and_continues_the_alternation(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["io", "sweep", "--schedulers", "mq-deadline", "--mappings", "ioprio-only", "--duration", "0.4",
                    "--reps", "3", "--until-width", "1.0001", "--time-cap", "20", "--kv-mib", "16", "--spill-mib",
                    "32", "--json"], kvds_env, timeout=200)
    assert res.returncode == 0, res.stderr[-2000:]
    env = json.loads(res.stdout)  # harness/emit.py's envelope
    doc = {"run": env["run"], **env["summary"]}
    rounds = doc["config"]["rounds"]
    assert rounds[0]["reps"] == {"mq-deadline": {"unloaded": 3, "baseline": 3, "ioprio-only": 3}}
    assert isinstance(rounds[-1]["stop"], str)
    per_variant = doc["schedulers"]["mq-deadline"]["reps_per_variant"]
    done = per_variant["ioprio-only"]
    assert rounds[-1]["reps"]["mq-deadline"] == per_variant and doc["config"]["reps"] == done
    assert (done - 3) % 2 == 0 and per_variant["baseline"] == 3  # grown in steps of two; baseline not re-run
    assert per_variant["unloaded"] == done  # the wide point's reference grows with it
    assert doc["config"]["plan"] == {"mq-deadline": ["ioprio-only"]}
    order = doc["schedulers"]["mq-deadline"]["rep_order"]
    assert len(order) == 3 * 3 + 2 * (done - 3)  # every repetition that ran is recorded
    assert [r for r, _ in order] == sorted(r for r, _ in order)  # repetitions numbered on across rounds
    for k in range(done):  # ABBA continued: odd repetitions reversed
        names = [n for r, n in order if r == k]
        full = ["unloaded", "baseline", "ioprio-only"] if k < 3 else ["unloaded", "ioprio-only"]
        assert names == (full if k % 2 == 0 else full[::-1])
