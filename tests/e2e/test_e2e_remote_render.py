"""`kvds e2e --target guest` prints the guest's factorial table on the host: the runs fetched home are rendered by
the command's own renderer (harness/remote/dispatch.py render_fetched, through the Verb the parser carries), and a
fetched run that is not the command's (another summary) is left to the side-by-side summary."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.remote.dispatch import render_fetched
from harness.remote.execute import HostOutcome
from harness.results import ResultStore
from e2e.cells import cells
from e2e.cli import VERB
from e2e.summary import SCHEMA, E2eSummary
from tests.e2e.test_e2e_report import _cell


def _guest_run(store: ResultStore) -> str:
    grid = cells("LRU", "ExpectedNextUse")
    line = "missed (goal TPOT p99 ratio <= 0.6: 0.9 [0.8, 1])"
    rows = [{"rep": 0, "swap_ins": 812, "workingset_refault_anon": 800, "pgsteal": 900, "mm_intent_lookups": 37}]
    summary = E2eSummary(
        SCHEMA, {c.name: {**_cell(c.policy, c.intents, 30.0 - 5 * i), "squeeze_per_rep": rows}
                 for i, c in enumerate(grid)},
        {"tpot_p99_ms": {"policy": {"value": -1.0, "lo": -2.0, "hi": 0.0}}},
        {"tpot_p99_ratio": {"status": "missed", "line": line}}, [[0, c.name] for c in grid],
        {"path": "mooncake", "steps": 500, "block_bytes": 16384},
        {"arena_bytes": 37 << 20, "memcg_limit_bytes": 28 << 20, "swap": "/dev/zram1", "scheduler": "mq-deadline",
         "device": {"path": "/dev/loop0"}, "squeeze": "per cell repetition"},
        {"stated": {"hog_mib": 64}}, {"start": {"loadavg": [0.5]}, "end": {"loadavg": [3.5]}}, 510.0)
    run = store.new_run("e2e", {}, host="guest")
    run.write_summary(summary.as_dict())
    return run.path.name


def test_a_fetched_guest_run_prints_as_its_command_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = ResultStore(tmp_path / "results")
    name = _guest_run(store)
    other = store.new_run("host-baseline", {})
    other.write_summary({"pread_direct_4k": {}})
    out = HostOutcome(tag="guest", target="guest", status="ok", runs=[name, other.path.name])
    assert render_fetched(VERB, [out], store) == [name]
    text = capsys.readouterr().out
    assert f"[guest] {name}:" in text
    lines = text.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("cell "))
    assert "TPOT p99 (ms)" in lines[header] and "swap-ins per rep" in lines[header]
    assert [x.split("  ")[0] for x in lines[header + 2:header + 6]] == [c.name for c in cells("LRU", "ExpectedNextUse")]
    assert "tpot_p99_ratio: missed (goal TPOT p99 ratio <= 0.6: 0.9 [0.8, 1])" in text
    assert "look-ups 37" in text  # the squeeze per repetition, with mm_intent's reclaim look-ups
