"""The report leads with the factorial table: an e2e run's section renders before the environment and the Summary
table, so the report's first table is the factorial one, and its goals' verdict lines reach report.json."""
from __future__ import annotations

import json
from pathlib import Path

from harness.report.build import build_report
from harness.report.context import load_suites
from harness.results import ResultStore
from e2e.cells import cells
from e2e.summary import SCHEMA, E2eSummary


def _cell(policy: str, intents: bool, p99_ms: float) -> dict:
    est = lambda v: {"value": v, "lo": v * 0.9, "hi": v * 1.1, "conf": 0.95}  # noqa: E731
    return {"policy": policy, "intents": intents, "reps": 3, "tpot_p50_us": est(4e3), "tpot_p99_us": est(p99_ms * 1e3),
            "slo_high": est(0.9), "goodput_tok_s": est(1000.0), "sim_tpot_p99_us": 20e3,
            "measured_to_sim_p99": est(p99_ms / 20)}


def test_the_first_table_of_the_report_is_the_factorial_table(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    grid = cells("LRU", "ExpectedNextUse")
    line = "missed (goal TPOT p99 ratio <= 0.6: 0.9 [0.8, 1])"
    summary = E2eSummary(SCHEMA, {c.name: _cell(c.policy, c.intents, 30.0 - 5 * i) for i, c in enumerate(grid)},
                         {"tpot_p99_ms": {"policy": {"value": -1.0, "lo": -2.0, "hi": 0.0}}},
                         {"tpot_p99_ratio": {"status": "missed", "line": line}}, [[0, c.name] for c in grid],
                         {"path": "mooncake", "steps": 2000, "block_bytes": 16384}, {}, {"stated": {}}, {})
    run = store.new_run("e2e", {})
    run.write_summary(summary.as_dict())
    paths = build_report(load_suites([run.run_id], store), tmp_path / "report")
    md = paths["markdown"].read_text()
    first = next(x for x in md.splitlines() if x.startswith("|"))
    assert first.startswith("| cell | TPOT p50 (ms) | TPOT p99 (ms) |"), first
    assert md.index("End to end") < md.index("| cell |")
    rows = [x for x in md.splitlines() if x.startswith("| LRU / no intents")]
    assert rows and "30 [27, 33]" in rows[0]  # TPOT p99 in ms with its interval
    # the rows in the design's order, reference first, though summary.json stores the cells' keys sorted
    lines = md.splitlines()
    start = lines.index(first)
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    table_rows = [x.split(" | ")[0].lstrip("| ") for x in lines[start + 2:end]]
    assert table_rows == [c.name for c in grid], table_rows
    # then where each cell's time went (its stalls; "not measured" here: the summary has none)
    stalls = next(i for i, x in enumerate(lines) if x.startswith("| cell | where the time went"))
    assert stalls > end and lines[stalls + 2].startswith("| LRU / no intents | not measured")
    verdicts = json.loads(paths["json"].read_text())["verdicts"]
    assert [v["e2e tpot_p99_ratio"] for v in verdicts.values()] == [line]


def test_a_stall_stored_as_null_renders_as_n_a(tmp_path: Path) -> None:
    """A kind dropped as a kernel accounting glitch in every step is NaN, stored as null in summary.json: the
    report shows n/a for it (a CI run's report once stopped on None / 1e3)."""
    store = ResultStore(tmp_path / "results")
    grid = cells("LRU", "ExpectedNextUse")
    kinds = {"reclaim": 1500.0, "swapin": 200.0, "blkio": None, "cpu": 1100.0}
    stalls = {"reps": 2, "per_step_us": {**kinds, "guard_waits": 0.1},
              "at_p99_steps": {**kinds, "guard_waits": 6.0, "guard": 1000.0, "tpot": 9e5, "steps": 20.0,
                               "rest_us": None},
              "glitched_steps": {"reclaim": 0, "swapin": 0, "blkio": 4000, "cpu": 0},
              "guard_response_us_median": 230.0}
    summary = E2eSummary(SCHEMA, {c.name: {**_cell(c.policy, c.intents, 30.0), "stalls": stalls} for c in grid},
                         {}, {}, [[0, c.name] for c in grid], {"path": "mooncake", "steps": 2000,
                                                                "block_bytes": 16384}, {}, {"stated": {}}, {})
    run = store.new_run("e2e", {})
    run.write_summary(summary.as_dict())
    md = build_report(load_suites([run.run_id], store), tmp_path / "report")["markdown"].read_text()
    row = next(x for x in md.splitlines() if x.startswith("| LRU / no intents | the 20 steps per repetition"))
    assert "reclaim 1.50, swap-in 0.20, block I/O wait n/a" in row and "rest n/a" in row, row
    # a summary from before the slowest step was kept
    assert "(mean TPOT 900.00 ms; slowest step n/a, mean over repetitions)" in row, row
