"""`kvds policy compare|sweep|bench`: seeds, intervals, determinism, speed."""
from __future__ import annotations

import json

from tests.conftest import run_kvds

FAST = ["--profile", "balanced", "--set", "n_requests=6", "--set", "gen_tokens=16:64"]


def test_compare_five_seeds_with_intervals_is_deterministic(kvds_env: dict) -> None:
    args = ["policy", "compare", *FAST, "--seeds", "5", "--json"]
    a, b = run_kvds(args, kvds_env), run_kvds(args, kvds_env)
    assert a.returncode == 0, a.stderr
    sa, sb = json.loads(a.stdout)["summary"], json.loads(b.stdout)["summary"]
    assert sa == sb
    assert set(sa) == {"LRU", "HotCold", "PredictiveHotness", "IntentAware", "DeadlineAware"}
    est = sa["LRU"]["dc_miss_ratio"]
    assert est["lo"] <= est["value"] <= est["hi"]


def test_fewer_than_five_seeds_is_refused(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--seeds", "3"], kvds_env)
    assert p.returncode == 2 and "at least 5 seeds" in p.stderr


def test_sweep_prints_one_row_per_policy(kvds_env: dict) -> None:
    p = run_kvds(["policy", "sweep", *FAST, "--fractions", "0.3,0.8", "--policies", "LRU,DeadlineAware"],
                 kvds_env)
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith(("LRU", "DeadlineAware"))]
    assert len(rows) == 2


def test_bad_tier_override_is_one_line(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--tier", "slow.speed=3"], kvds_env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1


def test_bench_reports_events_per_second(kvds_env: dict) -> None:
    p = run_kvds(["policy", "bench", "--events", "100000", "--repeat", "1", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["events"] == 100000 and out["events_per_s"] > 20000
    # cost per event must not grow like the number of live blocks (n log n overall)
    ns = [r["ns_per_event"] for r in out["scaling"]]
    assert max(ns) < 4 * min(ns)


def test_compare_over_a_request_trace_batched_by_seed(kvds_env: dict, tmp_path) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text("arrival_s,prompt_tokens,generated_tokens,deadline_ms,priority\n"
                   + "".join(f"{i * 0.05:.2f},{100 + 37 * i},{12 + i},2000,{(i * 29) % 101}\n" for i in range(8)))
    p = run_kvds(["policy", "compare", "--requests", str(csv), "--seeds", "5", "--policies", "LRU,IntentAware",
                  "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)["summary"]
    assert summary["LRU"]["dc_accesses"]["value"] > 0


def test_compare_with_a_bad_request_row_names_the_line(kvds_env: dict, tmp_path) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text("arrival_s,prompt_tokens,generated_tokens\n0,10,5\n0.1,ten,5\n")
    p = run_kvds(["policy", "compare", "--requests", str(csv)], kvds_env)
    assert p.returncode == 2 and "req.csv:3:" in p.stderr and p.stderr.count("\n") == 1
