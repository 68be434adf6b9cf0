"""The sweep's auto-grow rule (--until-width, --time-cap) and its default size, from constructed points; and a real
sweep that records its rounds and continues the ABBA alternation across them."""

from __future__ import annotations

import json

from harness import doctor
from io_priority import sweep
from tests.conftest import run_kvds


def _pt(sched: str, variant: str, lo: float, hi: float) -> dict:
    e = {"value": (lo * hi) ** 0.5, "lo": lo, "hi": hi, "conf": 0.95}
    return {"scheduler": sched, "variant": variant, "interference_service": e, "interference_factor": e}


def test_grow_adds_reps_only_where_an_inconclusive_interval_is_wide() -> None:
    g = sweep.Grow(width=2.0, time_cap_s=100.0)
    pts = [_pt("mq", "baseline", 0.5, 9.0),   # the reference: never judged, never grown for
           _pt("mq", "a", 1.0, 1.4),          # met: decided
           _pt("mq", "b", 2.0, 30.0),         # missed though wide: decided
           _pt("bfq", "c", 0.8, 4.0)]         # inconclusive and 5x wide: more repetitions under bfq only
    step = sweep.grow_step(pts, g, elapsed_s=20.0, reps_done={"mq": 4, "bfq": 4})
    assert step["more"] == {"bfq": 2} and step["wide"] == {"bfq": ["c"]}
    pts[3] = _pt("bfq", "c", 1.2, 1.9)  # inconclusive but narrower than 2x: the interval is as tight as asked
    assert sweep.grow_step(pts, g, 20.0, {"mq": 4, "bfq": 4})["more"] == {}


def test_grow_stops_before_a_round_that_would_pass_the_cap() -> None:
    g = sweep.Grow(width=2.0, time_cap_s=100.0)
    pts = [_pt("mq", "c", 0.8, 4.0)]
    # 80 s for 4 repetitions: 2 more take about 40 s, 120 > 100
    step = sweep.grow_step(pts, g, elapsed_s=80.0, reps_done={"mq": 4})
    assert step["more"] == {} and "time cap 100 s" in step["stop"] and "mq/c" in step["stop"]
    assert sweep.grow_step(pts, None, 1.0, {"mq": 4})["more"] == {}


def test_goal_judged_on_service_time_with_end_to_end_beside_it() -> None:
    p = _pt("mq", "a", 1.0, 1.4)
    p["interference_e2e_stall_free"] = {"value": 3.0, "lo": 2.0, "hi": 4.0, "conf": 0.95}
    p["spill_retained_est"] = {"value": 0.7, "lo": 0.6, "hi": 0.8, "conf": 0.95}
    sweep.judge([p], None)
    assert p["goal"]["status"] == "met" and p["goal"]["parts"][0]["goal"].startswith("service-time interference")
    assert p["end_to_end"]["status"] == "missed"
    assert sweep.interval_width({"lo": 2.0, "hi": 5.0}) == 2.5 and sweep.interval_width({"lo": None}) is None


def test_default_sweep_size() -> None:
    assert sweep.DEFAULT_SCHEDULERS == ("mq-deadline", "bfq")
    assert "spill-v2" in sweep.DEFAULT_MAPPINGS and "intent-paced" in sweep.DEFAULT_MAPPINGS
    assert sweep.DEFAULT_REPS >= 3  # an interval over repetitions needs 3


@doctor.skip_unless("loop", "ioprio", "ioprio.rt", "ioprio.idle")
@doctor.skip_unless("root")
def test_sweep_records_its_rounds_and_continues_the_alternation(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["io", "sweep", "--schedulers", "mq-deadline", "--mappings", "ioprio-only", "--duration", "0.4",
                    "--reps", "3", "--until-width", "1.0001", "--time-cap", "20", "--kv-mib", "16", "--spill-mib",
                    "32", "--json"], kvds_env, timeout=200)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    rounds = doc["config"]["rounds"]
    assert rounds[0]["reps"] == {"mq-deadline": 3} and isinstance(rounds[-1]["stop"], str)
    done = rounds[-1]["reps"]["mq-deadline"]
    assert doc["config"]["reps"] == done and (done - 3) % 2 == 0  # grown in steps of two repetitions
    order = doc["schedulers"]["mq-deadline"]["rep_order"]
    assert len(order) == 3 * done  # unloaded, baseline, ioprio-only: every repetition of every variant ran
    assert [r for r, _ in order] == sorted(r for r, _ in order)  # repetitions numbered on across rounds
    for k in range(done):  # ABBA continued: odd repetitions reversed
        names = [n for r, n in order if r == k]
        assert names == (["unloaded", "baseline", "ioprio-only"] if k % 2 == 0 else
                         ["ioprio-only", "baseline", "unloaded"])
