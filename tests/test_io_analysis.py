"""Pure logic of the I/O track: block-trace parsing, the Pareto frontier and the goal check, the JSON sanitiser."""

from __future__ import annotations

import math

from io_priority import blocktrace, sweep
from io_priority.runs import finite

TRACE = """# tracer: nop
#
# entries-in-buffer/entries-written: 3/5   #P:2
          ioload-1234    [001] ..... 100.000001: block_rq_issue: 7,3 RS 16384 () 2048 + 32 rt,0,0 [ioload]
          ioload-1235    [000] ..... 100.000002: block_rq_issue: 7,3 WS 1048576 () 524288 + 2048 idle,0,0 [ioload]
     kworker/0:1-9       [000] ..... 100.000003: block_rq_issue: 7,3 W 1048576 () 526336 + 2048 be,0,4 [kworker/0:1]
"""


def test_parse_trace_counts_priorities_and_losses() -> None:
    c = blocktrace.parse_trace(TRACE)
    assert c.by_op["R"] == {"rt/0": 1}
    assert c.by_op["W"] == {"idle/0": 1, "be/4": 1}
    assert c.lost == 2
    assert blocktrace.kernel_dev_t(7, 3) == (7 << 20) | 3


def _pt(sched: str, var: str, p99: float, mbs: float, inter: float, kept: float) -> dict:
    return {"scheduler": sched, "variant": var, "p99_us": {"value": p99}, "spill_mb_s": {"value": mbs},
            "interference_factor": {"value": inter}, "spill_retained": kept}


def test_pareto_and_goal() -> None:
    per = {"s": {"modes": {
        "unloaded": {"interference_factor": None, "latency_us": {"p99": {"value": 100}, "p50": {"value": 50}},
                     "spill_mb_s": None, "spill_retained": None, "mapping": None},
        "baseline": {"interference_factor": {"value": 50.0}, "latency_us": {"p99": {"value": 5000}, "p50": {"value": 9}},
                     "spill_mb_s": {"value": 400.0}, "spill_retained": 1.0, "mapping": "none"},
        "a": {"interference_factor": {"value": 1.2}, "latency_us": {"p99": {"value": 120}, "p50": {"value": 9}},
              "spill_mb_s": {"value": 250.0}, "spill_retained": 0.625, "mapping": "a"},
        "b": {"interference_factor": {"value": 3.0}, "latency_us": {"p99": {"value": 300}, "p50": {"value": 9}},
              "spill_mb_s": {"value": 100.0}, "spill_retained": 0.25, "mapping": "b"},
    }}}
    pts = {p["variant"]: p for p in sweep.points(per)}
    assert "unloaded" not in pts
    assert pts["baseline"]["pareto"] and pts["a"]["pareto"] and not pts["b"]["pareto"]  # b: worse on both
    assert pts["a"]["meets_goal"] and not pts["b"]["meets_goal"] and not pts["baseline"]["meets_goal"]
    assert sweep.goal_summary(list(pts.values()))["met_by"] == ["s/a"]


def test_finite_makes_strict_json() -> None:
    assert finite({"a": [math.nan, 1.0], "b": {"c": math.inf}}) == {"a": [None, 1.0], "b": {"c": None}}
