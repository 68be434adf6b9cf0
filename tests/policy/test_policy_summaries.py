"""The policy track's typed summaries (harness.results.StoredSummary): `--json` prints their fields, summary.json
holds the same, and `from_json` reads it back (the report reads every policy run through it)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kv_policy.compare_run import CompareSummary, PolicyFigures, VersusFigures
from kv_policy.goals_run import GoalsSummary
from kv_policy.replay_run import ReplaySummary
from kv_policy.sweep_run import SweepSummary
from kv_policy.generate_run import GenerateSummary
from kv_policy.import_run import ImportSummary
from tests.conftest import run_kvds

FAST = ["--profile", "balanced", "--set", "n_requests=6", "--set", "gen_tokens=16:64", "--seeds", "5"]
EST = {"value": 0.1, "lo": 0.05, "hi": 0.15, "conf": 0.95}


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_compare_json_and_summary_json_have_the_fields(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--policies", "LRU,ExpectedNextUse,MIN", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert list(doc["summary"]) == _fields(CompareSummary)
    stored = json.loads((Path(doc["run"]) / "summary.json").read_text())
    assert stored == doc["summary"] and set(stored["policies"]) == {"LRU", "ExpectedNextUse", "MIN"}
    back = CompareSummary.from_json(stored)
    assert back.as_dict() == doc["summary"] and back.priorities is None  # a generated profile: its own classes
    # the nested rows are typed: every stored key is a field, and reads back as stored
    for name in ("LRU", "ExpectedNextUse", "MIN"):
        assert set(stored["policies"][name]) == set(_fields(PolicyFigures))
        assert PolicyFigures.from_json(stored["policies"][name]).as_dict() == stored["policies"][name]
    versus = stored["versus_lru"]["ExpectedNextUse"]
    assert set(versus) == set(_fields(VersusFigures))  # MIN ran: the gap closed is there
    assert VersusFigures.from_json(versus).as_dict() == versus


def test_sweep_json_and_summary_json_have_the_fields(kvds_env: dict) -> None:
    p = run_kvds(["policy", "sweep", *FAST, "--fractions", "0.3,0.6", "--policies", "LRU,MIN", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    # no real-system row and no contender ran: the verdicts against the best such row are left out, nothing else
    assert list(doc["summary"]) == [f for f in _fields(SweepSummary) if f not in SweepSummary.OMIT_WHEN_NONE]
    stored = json.loads((Path(doc["run"]) / "summary.json").read_text())
    assert set(stored["by_fraction"]) == {"0.3", "0.6"} and stored["policies"] == ["LRU", "MIN"]
    assert SweepSummary.from_json(stored).as_dict() == doc["summary"] == stored


def test_summaries_whose_fields_are_the_stored_keys_round_trip() -> None:
    goals = GoalsSummary([{"profile": "balanced", "policy": "LRU", "status": "met", **EST}], {"balanced": {}},
                         {"balanced": {}}, [0, 1, 2, 3, 4], "0.5 x peak live KV", "profiles balanced", None)
    replay = ReplaySummary({"LRU": {"dc_misses": 3}}, {"limit_bytes": 1 << 20}, {}, {"LRU": {"50.0": EST}})
    gen = GenerateSummary("t.npz", {"alloc": 1}, 4096)
    imp = ImportSummary("t.npz", {"alloc": 1}, 4096, "mooncake", 3, "priorities assigned by kvds (rule: x; seed 0)")
    for s in (goals, replay, gen, imp):
        assert list(s.as_dict()) == _fields(type(s))
        assert type(s).from_json(json.loads(json.dumps(s.as_dict()))) == s


def test_replay_rows_are_typed_key_by_key() -> None:
    """replay.summary_row's figures pass through ReplayRow when the run is written: a figure the dataclass does
    not name fails there; a row stored before a figure existed reads it as None."""
    import pytest

    from kv_policy.replay_run import ReplayRow

    full = {f: 1.0 for f in _fields(ReplayRow)}
    assert ReplayRow.of(full).as_dict() == full
    with pytest.raises(TypeError):
        ReplayRow.of({**full, "real_p999_us": 2.0})
    old = ReplayRow.from_json({"dc_misses": 3, "real_p99_us": 812.0})
    assert old.dc_misses == 3 and old.real_p99_us == 812.0 and old.real_stall_p99_us is None


def test_replay_renders_from_its_typed_summary(capsys) -> None:
    """render.replay takes the ReplaySummary itself: one repetition prints "(point estimate)", a missing figure "-"
    with its reason, never "nan"."""
    from kv_policy import render
    from kv_policy.replay_run import ReplayRow

    row = {f: 1.0 for f in _fields(ReplayRow)}
    row.update(real_stall_p99_us={"value": 812.0, "lo": 700.0, "hi": 900.0}, real_slo=EST, miss_read_p50_us=None,
               p99_ratio_real_to_sim={"value": 1.1, "lo": None, "hi": None}, real_stall_p99_by_rep_us=[812.0])
    s = ReplaySummary({"LRU": row}, {"limit_bytes": 1 << 28}, {}, {"LRU": {"50.0": EST}}, "t.npz",
                      {"steps": 10, "critical_access": 5, "blocks": 3}, "0.5 x peak live KV", "/dev/loop9",
                      "mq-deadline", {"critical_read": "rt/0"}, "--tier slow.read_latency_us=80", None)
    render.replay(s)
    out = capsys.readouterr().out
    assert "0.812 [0.7, 0.9]" in out and "1.1 (point estimate)" in out and "- (no miss)" in out
    assert "nan" not in out.lower() and "1 rep" not in out
