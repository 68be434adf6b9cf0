"""Serving traces (Mooncake JSONL with prefix hashes, Azure CSV): read from small hand-written files, so nothing
depends on the two shipped slices; bad lines are one line naming the line, exit 2, nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from kv_policy import codes, serving_load, serving_traces
from kv_policy.importers import SHIPPED, TraceOptions, load_trace
from kv_policy.profiles import get_profile
from tests.conftest import run_kvds


def _mooncake(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = [{"timestamp": 0, "input_length": 1100, "output_length": 3, "hash_ids": [7, 8, 9]},
        {"timestamp": 500, "input_length": 600, "output_length": 2, "hash_ids": [7, 11]},
        {"timestamp": 4000, "input_length": 1024, "output_length": 2, "hash_ids": [7, 8]}]


def test_formats_are_detected_by_content(tmp_path: Path) -> None:
    m = _mooncake(tmp_path / "any-name.txt", GOOD)
    a = tmp_path / "x.csv"
    a.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n")
    assert TraceOptions(str(m)).kind() == "mooncake" and TraceOptions(str(a)).kind() == "azure"
    assert serving_traces.detect(tmp_path / "x.csv") == "azure"


def test_a_hash_is_one_shared_prefix_block_of_512_tokens_mapped_onto_engine_blocks(tmp_path: Path) -> None:
    """Hash 7 is named by all three requests: one set of engine blocks (512 / block_tokens of them), read by each
    request's prefill; the last hash of a request holds what its input has left."""
    prof = get_profile("balanced", block_tokens=64)
    t = load_trace(TraceOptions(str(_mooncake(tmp_path / "m.jsonl", GOOD))), prof, seed=0)
    shared = np.flatnonzero(t.block_request < 0)
    by_hash = {h: np.flatnonzero(t.block_request == -1 - h) for h in (7, 8, 9, 11)}
    assert set(np.concatenate(list(by_hash.values())).tolist()) == set(shared.tolist())
    assert len(by_hash[7]) == 512 // 64 and len(by_hash[8]) == 8
    assert len(by_hash[9]) == -(-(1100 - 1024) // 64) and len(by_hash[11]) == -(-(600 - 512) // 64)
    allocs = t.block[t.kind == codes.ALLOC]
    assert all(np.count_nonzero(np.isin(allocs, b)) == len(b) for b in by_hash.values())  # allocated once
    prefill = t.block[(t.kind == codes.ACCESS) & ~t.critical]
    assert np.count_nonzero(np.isin(prefill, by_hash[7])) == 3 * len(by_hash[7])          # read by each request
    assert not np.isin(t.block[t.kind == codes.FREE], shared).any()                      # never freed: cached
    # once no active request reads hash 7, it is announced cold (evictable, no longer decode-critical)
    cold = (t.kind == codes.HINT) & (t.cls == codes.COLD_SPILLABLE) & np.isin(t.block, by_hash[7])
    assert cold.any()
    assert t.meta["prefix_blocks"] == 4 and t.meta["requests"] == 3


def test_a_later_request_hits_a_cached_prefix_or_pays_for_it(tmp_path: Path) -> None:
    """The third request arrives long after the first finished: with room for everything its prefix blocks hit;
    with a tiny fast tier they are reloaded or recomputed (prefill reload tokens > 0)."""
    from kv_policy.metrics import run_metrics
    from kv_policy.registry import make_policy
    from kv_policy.simulator import simulate
    from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace

    t = load_trace(TraceOptions(str(_mooncake(tmp_path / "m.jsonl", GOOD))), get_profile("balanced"), seed=0)
    roomy = run_metrics(simulate(t, make_policy("LRU"), for_trace(t, DEFAULT_FAST, DEFAULT_SLOW,
                                                                  t.peak_live_bytes())), t)
    tight = run_metrics(simulate(t, make_policy("LRU"), for_trace(t, DEFAULT_FAST, DEFAULT_SLOW,
                                                                  int(t.peak_live_bytes() * 0.05))), t)
    assert roomy["prefill_reload_tokens"] == 0.0
    assert tight["prefill_reload_tokens"] > 0.0


def test_priorities_follow_the_seeded_rule_and_say_so(tmp_path: Path) -> None:
    path = _mooncake(tmp_path / "m.jsonl", GOOD * 1)
    prof = get_profile("balanced")
    a, b = (load_trace(TraceOptions(str(path)), prof, seed=s) for s in (3, 3))
    assert np.array_equal(a.block_priority, b.block_priority)
    reqs = serving_traces.read(path, "mooncake")
    specs = serving_load.specs(reqs, prof, 3, 20.0)
    rng = np.random.default_rng([3, serving_load.RULE_STREAM])
    w = np.array([c.weight for c in prof.classes])
    first = prof.classes[int(rng.choice(len(prof.classes), size=3, p=w / w.sum())[0])]
    assert first.prio_lo <= specs[0].priority <= first.prio_hi and specs[0].tpot_us == first.tpot_us
    assert a.meta["priorities"].startswith("priorities assigned by kvds (rule:") and "seed 3" in a.meta["priorities"]


def test_concurrency_scales_with_the_arrival_rate() -> None:
    """Little's law with 1.5x headroom: 100 requests over 10 s at 20 ms steps, 200 output tokens each ->
    0.2 requests/step x 200 steps x 1.5 = 60 admitted and decoded per step; ten times slower -> 6."""
    reqs = [serving_traces.ServedRequest(i * 0.1, 100, 200) for i in range(101)]
    assert serving_load.concurrency(reqs, 20.0) == 60
    slow = [serving_traces.ServedRequest(i * 1.0, 100, 200) for i in range(101)]
    assert serving_load.concurrency(slow, 20.0) == 6
    assert serving_load.concurrency(reqs[:1], 20.0) == serving_load.MIN_ACTIVE


def test_window_max_requests_and_time_scale(tmp_path: Path) -> None:
    reqs = serving_traces.read(_mooncake(tmp_path / "m.jsonl", GOOD), "mooncake")
    assert [r.arrival_s for r in reqs] == [0.0, 0.5, 4.0]
    picked = serving_traces.select(reqs, (0.4, 5.0), None, 2.0)
    assert [r.arrival_s for r in picked] == [0.0, 1.75]                     # re-based, then halved
    assert len(serving_traces.select(reqs, None, 2, 1.0)) == 2
    with pytest.raises(UserError, match="no request"):
        serving_traces.select(reqs, (10.0, 20.0), None, 1.0)


def test_azure_datetimes_are_seconds_from_the_first_row(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n")
    reqs = serving_traces.read(a, "azure")
    assert reqs[0].arrival_s == 0.0 and reqs[1].arrival_s == pytest.approx(4.314579, abs=1e-6)
    assert (reqs[1].input_tokens, reqs[1].output_tokens, reqs[1].hash_ids) == (396, 109, ())


BAD_MOONCAKE = {
    "truncated-json": ('{"timestamp": 900, "input_length": 10', "not valid JSON"),
    "negative-length": ('{"timestamp": 900, "input_length": -5, "output_length": 2, "hash_ids": [1]}',
                        "input_length -5 is below 1"),
    "non-numeric-length": ('{"timestamp": 900, "input_length": "many", "output_length": 2, "hash_ids": [1]}',
                           "input_length 'many' is not an integer"),
    "time-goes-backwards": ('{"timestamp": 100, "input_length": 10, "output_length": 2, "hash_ids": [1]}',
                            "timestamp goes backwards"),
    "empty-hash-ids": ('{"timestamp": 900, "input_length": 10, "output_length": 2, "hash_ids": []}',
                       "hash_ids must be a non-empty list"),
    "non-integer-hash-ids": ('{"timestamp": 900, "input_length": 10, "output_length": 2, "hash_ids": [1.5]}',
                             "hash_ids must be non-negative integers"),
    "huge-request": ('{"timestamp": 900, "input_length": 1000000000000, "output_length": 2, "hash_ids": [1]}',
                     "exceeds 10,000,000 tokens"),
    "hash-ids-beyond-the-input": ('{"timestamp": 900, "input_length": 10, "output_length": 2, "hash_ids": [1, 2]}',
                                  "2 hash_ids of 512 tokens for an input of 10"),
}


@pytest.mark.parametrize("case", sorted(BAD_MOONCAKE))
def test_a_bad_mooncake_line_is_one_line_exit_2_and_nothing_written(case: str, tmp_path: Path,
                                                                      kvds_env: dict) -> None:
    line, msg = BAD_MOONCAKE[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD[0]) + "\n" + json.dumps(GOOD[1]) + "\n" + line + "\n")
    out = tmp_path / "out.npz"
    p = run_kvds(["policy", "import", "--format", "mooncake", "--in", str(bad), "--out", str(out)], kvds_env)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "bad.jsonl:3:" in p.stderr and msg in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not out.exists() and list(tmp_path.iterdir()) == [bad]


BAD_AZURE = {
    "not-a-time": ("yesterday,10,5", "TIMESTAMP 'yesterday' is neither"),
    "negative-length": ("2023-11-16 18:16:00.0,-3,5", "ContextTokens -3 is below 1"),
    "non-numeric-length": ("2023-11-16 18:16:00.0,10,lots", "GeneratedTokens 'lots' is not an integer"),
    "time-goes-backwards": ("2023-11-16 18:15:00.0,10,5", "timestamp goes backwards"),
    "huge-request": ("2023-11-16 18:16:00.0,1000000000000,5", "exceeds 10,000,000 tokens"),
    "truncated-row": ("2023-11-16 18:16:00.0,10", "2 columns, the header has 3"),
}


@pytest.mark.parametrize("case", sorted(BAD_AZURE))
def test_a_bad_azure_line_is_one_line_exit_2_and_nothing_written(case: str, tmp_path: Path, kvds_env: dict) -> None:
    row, msg = BAD_AZURE[case]
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n" + row + "\n")
    out = tmp_path / "out.npz"
    p = run_kvds(["policy", "compare", "--trace", str(bad), "--format", "azure", "--json"], kvds_env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "bad.csv:3:" in p.stderr and msg in p.stderr, p.stderr
    assert p.stdout == ""
    p = run_kvds(["policy", "import", "--in", str(bad), "--format", "azure", "--out", str(out)], kvds_env)
    assert p.returncode == 2 and not out.exists()


def test_compare_on_the_shipped_mooncake_slice_labels_the_priorities(kvds_env: dict) -> None:
    assert SHIPPED["mooncake-slice"].exists() and SHIPPED["azure-slice"].exists()
    p = run_kvds(["policy", "compare", "--trace", "mooncake-slice", "--max-requests", "8", "--seeds", "5",
                  "--fast-fraction", "0.1", "--policies", "LRU,MIN", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    s = doc["summary"]
    assert s["priorities"].startswith("priorities assigned by kvds (rule:") and "seeds 0-4" in s["priorities"]
    assert s["source"].startswith("mooncake trace") and s["seeds"] == [0, 1, 2, 3, 4]
    lru, opt = (s["policies"][p]["dc_miss_ratio"]["value"] for p in ("LRU", "MIN"))
    assert 0 <= opt <= lru
    assert json.loads((Path(doc["run"]) / "summary.json").read_text()) == s
    text = run_kvds(["policy", "compare", "--trace", "mooncake-slice", "--max-requests", "8", "--seeds", "5",
                     "--fast-fraction", "0.1", "--policies", "LRU"], kvds_env)
    assert text.returncode == 0 and "priorities assigned by kvds (rule:" in text.stdout


@pytest.mark.parametrize("args,msg", [(["--window", "5:1"], "need 0 <= START < END"),
                                      (["--window", "abc"], "expected START:END"),
                                      (["--time-scale", "0"], "--time-scale must be positive"),
                                      (["--format", "azure"], "an Azure trace needs the columns")])
def test_bad_slicing_options_are_one_line(args: list[str], msg: str, tmp_path: Path, kvds_env: dict) -> None:
    path = _mooncake(tmp_path / "m.jsonl", GOOD)
    p = run_kvds(["policy", "compare", "--trace", str(path), *args], kvds_env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and msg in p.stderr, p.stderr


def test_goals_on_a_trace_judge_the_one_contender_and_label_the_priorities(tmp_path: Path, kvds_env: dict) -> None:
    from kv_policy import goals as g

    path = _mooncake(tmp_path / "m.jsonl", GOOD)
    p = run_kvds(["policy", "goals", "--trace", str(path), "--seeds", "5", "--fast-fraction", "0.2", "--json"],
                 kvds_env)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["summary"]
    assert [(v["profile"], v["policy"], v["what"]) for v in s["verdicts"]] == \
        [(x.profile, x.policy, x.what) for x in g.TRACE_GOALS]
    assert all(v["status"] in ("met", "missed", "inconclusive") for v in s["verdicts"])
    assert set(s["summary"][g.TRACE]) == set(g.POLICIES)
    assert s["priorities"].startswith("priorities assigned by kvds (rule:") and "seeds 0-4" in s["priorities"]


def test_capacity_fraction_of_a_serving_trace_counts_what_requests_in_flight_reference(tmp_path: Path) -> None:
    """The prefix cache keeps every hash ever named: those blocks are not live KV once no request reads them, so the
    fast tier's share stays a share of the working set however long the slice (compare.live_basis)."""
    from kv_policy.compare import Capacity, live_basis

    # three requests one after another (each finishes before the next arrives), each naming two new hashes
    rows = [{"timestamp": t, "input_length": 1024, "output_length": 2, "hash_ids": [2 * i, 2 * i + 1]}
            for i, t in enumerate((0, 5000, 10000))]
    t = load_trace(TraceOptions(str(_mooncake(tmp_path / "m.jsonl", rows))), get_profile("balanced"), 0)
    one_request = 2 * 512 // 16 + 1  # its two hashes' blocks and the block its decode grows
    block = int(t.block_size[0])
    assert t.peak_live_bytes() == (3 * 2 * 512 // 16 + 1) * block  # every hash stays cached
    assert t.peak_referenced_bytes() == one_request * block
    assert live_basis(t) == t.peak_referenced_bytes()
    assert Capacity(0.5).for_trace(t) == int(one_request * block * 0.5)
