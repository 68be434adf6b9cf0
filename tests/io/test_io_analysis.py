"""Pure logic of the I/O track: block-trace parsing, the Pareto frontier and the goal check, the JSON sanitiser."""

from __future__ import annotations

import math

from io_priority import blocktrace, goal
from io_priority.sweep_points import points
from harness.results import strict as finite  # the encoder io summaries go through

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


def _e(v: float, lo: float | None = None, hi: float | None = None) -> dict:
    return {"value": v, "lo": v if lo is None else lo, "hi": v if hi is None else hi, "conf": 0.95}


def _modes() -> dict:
    return {
        "unloaded": {"interference_factor": None, "latency_us": {"p99": _e(100), "p50": _e(50)},
                     "spill_mb_s": None, "spill_retained": None, "mapping": None,
                     "per_rep_p99_us": [100.0, 110.0, 120.0]},
        "baseline": {"interference_factor": _e(50.0, 40, 60), "latency_us": {"p99": _e(5000), "p50": _e(9)},
                     "spill_mb_s": _e(400.0), "spill_retained": 1.0, "spill_retained_est": _e(1.0), "mapping": "none"},
        "a": {"interference_factor": _e(1.2, 1.1, 1.3), "latency_us": {"p99": _e(120), "p50": _e(9)},
              "spill_mb_s": _e(250.0), "spill_retained": 0.625, "spill_retained_est": _e(0.625, 0.55, 0.7),
              "mapping": "a"},
        "b": {"interference_factor": _e(3.0, 2.0, 4.0), "latency_us": {"p99": _e(300), "p50": _e(9)},
              "spill_mb_s": _e(100.0), "spill_retained": 0.25, "spill_retained_est": _e(0.25, 0.2, 0.3),
              "mapping": "b"},
        # 0.73x as a point, but its interval reaches 4.8x: not met (the old point-estimate rule said met)
        "c": {"interference_factor": _e(0.73, 0.2, 4.8), "latency_us": {"p99": _e(90), "p50": _e(9)},
              "spill_mb_s": _e(50.0), "spill_retained": 0.9, "spill_retained_est": _e(0.9, 0.6, 1.2), "mapping": "c"},
    }


def test_pareto_and_goal_from_intervals() -> None:
    per = {"s": {"modes": _modes()}}
    pts = {p["variant"]: p for p in points(per)}
    assert "unloaded" not in pts
    assert pts["baseline"]["pareto"] and pts["a"]["pareto"] and not pts["b"]["pareto"]  # b: worse on both
    status = {v: p["goal"]["status"] for v, p in pts.items()}
    assert status == {"baseline": "reference", "a": "met", "b": "missed", "c": "inconclusive"}
    assert [p["meets_goal"] for p in pts.values()] == [False, True, False, False]
    g = goal.goal_summary(list(pts.values()), per)
    assert g["met_by"] == ["s/a"] and g["missed_by"] == ["s/b"] and g["inconclusive"] == ["s/c"]
    assert "s/baseline" not in g["met_by"] + g["missed_by"] + g["inconclusive"]
    assert abs(g["unloaded_p99_spread"]["s"] - 1.2) < 1e-9
    line = goal.goal_line(g)
    assert "met by s/a;" in line and "missed by s/b;" in line and "inconclusive: s/c" in line
    assert "[0.2, 4.8]" in " ".join(pts["c"]["goal"]["text"])


def test_baseline_never_meets_even_when_its_numbers_would() -> None:
    modes = _modes()
    modes["baseline"]["interference_factor"] = _e(1.0, 0.9, 1.1)
    pts = {p["variant"]: p for p in points({"s": {"modes": modes}})}
    g = goal.goal_summary(list(pts.values()), {"s": {"modes": modes}})
    assert pts["baseline"]["meets_goal"] is False and "s/baseline" not in g["met_by"]


def test_reference_stability_needs_repetitions() -> None:
    modes = _modes()
    modes["unloaded"]["per_rep_p99_us"] = [100.0]  # one repetition: the stability test cannot pass
    per = {"s": {"modes": modes}}
    pts = {p["variant"]: p for p in points(per)}
    assert pts["a"]["goal"]["status"] == "inconclusive"
    assert any("n too small" in t for t in pts["a"]["goal"]["text"])
    assert goal.goal_summary(list(pts.values()), per)["met_by"] == []
    modes["unloaded"]["per_rep_p99_us"] = [100.0, 400.0, 110.0]  # the reference itself moved 4x
    pts = {p["variant"]: p for p in points(per)}
    g = goal.goal_summary(list(pts.values()), per)
    assert pts["a"]["goal"]["status"] == "inconclusive" and g["met_by"] == []
    assert g["met_against_unstable_reference"] == ["s/a"]


def test_best_clean_interference() -> None:
    per = {"s": {"modes": _modes()}}
    pts = {p["variant"]: p for p in points(per)}
    pts["a"]["overlap"] = {"clean_interference_factor": {"value": 1.1}}
    pts["b"]["overlap"] = {"clean_interference_factor": {"value": 0.9}}  # keeps only 25%: not a candidate
    g = goal.goal_summary(list(pts.values()), per)
    assert g["best_clean_interference"] == {"value": 1.1, "lo": None, "hi": None, "point": "s/a"}


def test_finite_makes_strict_json() -> None:
    assert finite({"a": [math.nan, 1.0], "b": {"c": math.inf}}) == {"a": [None, 1.0], "b": {"c": None}}


def test_write_priority_check_reports_writeback_escape() -> None:
    from io_priority.variant_figures import write_priority_check

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

    from io_priority.variant_figures import _overlap
    from io_priority.workload import RepResult

    def rep(service_us: list[int], bits: list[int]) -> RepResult:
        svc = np.array(service_us, dtype=np.int64) * 1000
        return RepResult(svc, {}, None, None, contexts=(svc << 2) | np.array(bits, dtype=np.int64))

    loaded = [rep([100] * 900 + [5000] * 100, [0] * 900 + [1] * 100) for _ in range(3)]  # slow reads overlapped
    unloaded = [rep([100] * 1000, [0] * 1000) for _ in range(3)]
    ov = _overlap(loaded, unloaded, n_boot=50)
    assert ov["clean_reads"] == 2700 and abs(ov["clean_fraction"] - 0.9) < 1e-9
    assert ov["clean_service_p99_us"]["value"] == 100 and ov["overlapped_service_p99_us"] is None  # 300 < 1000
    assert ov["clean_interference_factor"]["value"] == 1.0
    one = _overlap([rep([100] * 90 + [5000] * 10, [0] * 90 + [1] * 10)], unloaded[:1], n_boot=50)
    assert math.isnan(one["clean_service_p99_us"]["value"]) and "n too small" in one["clean_service_p99_us"]["reason"]


def test_bench_table_prints_missing_as_dash_with_reason() -> None:
    from io_priority.render import print_table

    lines: list[str] = []
    na = {"value": None, "lo": None, "hi": None, "reason": "n too small: 400 samples, p99 needs >= 1000"}
    mode = {"mapping": None, "latency_us": {"p50": {"value": 80.0, "lo": None, "hi": None,
                                                    "reason": "n too small: 2 repetitions, an interval needs >= 3"},
                                            "p99": na,
                                            "p99.9": {**na,
                                                      "reason": "n too small: 400 samples, p99.9 needs >= 10000"}},
            "max_us": None, "interference_factor": None, "spill_mb_s": None, "spill_retained": None, "overlap": None,
            "reads": 400, "block_layer": None, "write_priority": None}
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        print_table({"unloaded": mode}, "t", echo=lines.append)
    out = buf.getvalue()
    assert "n too" in out and "nan" not in out.lower()
    from io_priority.render import cell, value_cell

    assert value_cell(mode["latency_us"]["p99.9"]) == "- (n too small: 400 < 10000)"
    assert cell(mode["latency_us"]["p99"]) == "- (n too small: 400 < 1000)"
    assert cell(mode["latency_us"]["p50"]) == "80 (point estimate)"  # harness/report/fmt, as every track prints it
    assert cell({"value": 80.0, "lo": 70.0, "hi": 95.0}) == "80 [70, 95]"
