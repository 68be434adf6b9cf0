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
    per["s"]["modes"]["unloaded"]["per_rep_p99_us"] = [100.0, 120.0]
    pts["a"]["overlap"] = {"clean_interference_factor": {"value": 1.1}}
    pts["b"]["overlap"] = {"clean_interference_factor": {"value": 0.9}}  # keeps only 25%: not a candidate
    g = sweep.goal_summary(list(pts.values()), per)
    assert abs(g["unloaded_p99_spread"]["s"] - 1.2) < 1e-9
    assert g["best_clean_interference"] == {"value": 1.1, "point": "s/a"}
    assert g["met_by"] == ["s/a"] and g["met_against_unstable_reference"] == []
    per["s"]["modes"]["unloaded"]["per_rep_p99_us"] = [100.0, 400.0]  # the reference itself moved 4x
    g = sweep.goal_summary(list(pts.values()), per)
    assert g["met_by"] == [] and g["met_against_unstable_reference"] == ["s/a"]


def test_finite_makes_strict_json() -> None:
    assert finite({"a": [math.nan, 1.0], "b": {"c": math.inf}}) == {"a": [None, 1.0], "b": {"c": None}}


def test_write_priority_check_reports_writeback_escape() -> None:
    from io_priority.bench import write_priority_check

    block = {"by_op": {"R": {"rt/0": 10}, "W": {"be/4": 95, "idle/0": 5}}, "lost_events": 0,
             "issuers_by_prio": {"W be/4": {"kworker": 95}, "W idle/0": {"ioload-1a2b": 5}}}
    chk = write_priority_check("idle/0", block, buffered=True)
    assert chk["honoured_fraction"] == 0.05 and chk["seen_instead"] == {"be/4": 95}
    assert "writeback by the flusher ignores the writer's I/O priority" in chk["note"] and "kworker" in chk["note"]
    honoured = write_priority_check("idle/0", {"by_op": {"W": {"idle/0": 40}}, "lost_events": 0})
    assert honoured["honoured_fraction"] == 1.0 and honoured["note"] is None  # direct spill: nothing to say
    fsynced = write_priority_check("idle/0", {"by_op": {"W": {"idle/0": 40}}, "lost_events": 0}, buffered=True)
    assert "its own fsync" in fsynced["note"]
    assert write_priority_check(None, block) is None  # the writer asked for nothing


def test_overlap_splits_reads_by_spill_context() -> None:
    import numpy as np

    from io_priority.bench import _overlap
    from io_priority.workload import RepResult

    def rep(service_us: list[int], bits: list[int]) -> RepResult:
        svc = np.array(service_us, dtype=np.int64) * 1000
        return RepResult(svc, {}, None, None, contexts=(svc << 2) | np.array(bits, dtype=np.int64))

    loaded = [rep([100] * 90 + [5000] * 10, [0] * 90 + [1] * 10)]  # the slow reads all overlapped a write
    unloaded = [rep([100] * 100, [0] * 100)]
    ov = _overlap(loaded, unloaded, n_boot=50)
    assert ov["clean_reads"] == 90 and abs(ov["clean_fraction"] - 0.9) < 1e-9
    assert ov["clean_service_p99_us"]["value"] == 100 and ov["overlapped_service_p99_us"] == 5000
    assert ov["clean_interference_factor"]["value"] == 1.0
