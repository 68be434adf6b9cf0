"""Importers: the seed prototype JSONL, request traces, and one-line errors naming the bad line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from kv_policy import codes
from kv_policy.importers import import_prototype, import_requests, read_requests
from kv_policy.profiles import get_profile
from tests.conftest import SEED_TRACE, run_kvds

def test_seed_prototype_trace_imports() -> None:
    t = import_prototype(SEED_TRACE)
    c = t.counts()
    assert (c["blocks"], c["alloc"], c["access"], c["critical_access"]) == (96, 96, 153, 153)  # tests/data/README.md
    assert len(t) == 463 and np.all(t.block_size == 65536)


def test_bad_prototype_line_names_the_line(tmp_path: Path) -> None:
    lines = SEED_TRACE.read_text().splitlines()[:10]
    lines[6] = lines[6].replace('"size_bytes": 65536', '"size_bytes": "big"')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:7: .*size_bytes"):
        import_prototype(bad)


def test_cli_bad_trace_line_is_one_line_exit_2(tmp_path: Path, kvds_env: dict) -> None:
    lines = SEED_TRACE.read_text().splitlines()[:5]
    lines[3] = "{not json"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    p = run_kvds(["policy", "import", "--format", "prototype", "--in", str(bad), "--out", str(tmp_path / "o")],
                 kvds_env)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "bad.jsonl:4:" in p.stderr and "Traceback" not in p.stderr


def test_request_csv_imports_and_runs_to_completion(tmp_path: Path) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text("arrival_s,prompt_tokens,generated_tokens,deadline_ms,priority\n"
                   "0.0,100,20,2000,90\n0.05,300,10,,10\n0.1,40,5,500,50\n")
    t = import_requests(csv, get_profile("balanced"), seed=1)
    own = t.block_request >= 0
    assert set(t.block_request[own].tolist()) == {0, 1, 2}
    assert set(t.block[t.kind == codes.FREE].tolist()) == set(np.flatnonzero(own).tolist())
    assert sorted(set(t.block_priority.tolist())) == [10, 50, 90]


def test_request_jsonl_and_azure_column_names(tmp_path: Path) -> None:
    j = tmp_path / "req.jsonl"
    j.write_text('{"TIMESTAMP": 10.0, "ContextTokens": 64, "GeneratedTokens": 8}\n'
                 '{"TIMESTAMP": 10.5, "ContextTokens": 32, "GeneratedTokens": 4, "priority": 80}\n')
    specs = read_requests(j, step_ms=20.0)
    assert [s.arrival_step for s in specs] == [0, 25]
    assert [s.priority for s in specs] == [50, 80]


@pytest.mark.parametrize("row,msg", [("0,abc,10,,", r"req\.csv:3: prompt_tokens 'abc'"),
                                     ("0,10,0,,", r"req\.csv:3: .*at least 1"),
                                     ("0,10,5,,101", r"req\.csv:3: priority 101")])
def test_bad_request_rows_name_the_line(tmp_path: Path, row: str, msg: str) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text(f"arrival_s,prompt_tokens,gen_tokens,deadline_ms,priority\n0,10,5,,\n{row}\n")
    with pytest.raises(UserError, match=msg):
        read_requests(csv, step_ms=20.0)


def test_generate_and_import_roundtrip_through_cli(tmp_path: Path, kvds_env: dict) -> None:
    out = tmp_path / "t.npz"
    p = run_kvds(["policy", "generate", "--profile", "speculative_decode", "--set", "n_requests=5",
                  "--seed", "2", "--out", str(out), "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    from kv_policy.trace import load_npz

    assert load_npz(out).meta["seed"] == 2
