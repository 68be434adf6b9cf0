"""`kvds policy compare|sweep|speed|goals`: seeds, reference rows, paired intervals, trace files, determinism."""
from __future__ import annotations

import json
import math
from pathlib import Path

from tests.conftest import REPO, run_kvds

SAMPLE = REPO / "tests" / "data" / "seed_trace_deadline_pressure_sample.jsonl"  # whole requests: tests/data/README.md
FAST = ["--profile", "balanced", "--set", "n_requests=6", "--set", "gen_tokens=16:64"]
CONTENDERS = {"LRU", "HotCold", "PredictiveHotness", "IntentAware", "DeadlineAware", "ExpectedNextUse"}


def _compare(env: dict, *extra: str) -> dict:
    p = run_kvds(["policy", "compare", *FAST, "--seeds", "5", "--json", *extra], env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_compare_is_deterministic_and_has_reference_rows(kvds_env: dict) -> None:
    a, b = _compare(kvds_env), _compare(kvds_env)
    assert a["summary"] == b["summary"]
    assert set(a["summary"]["policies"]) == CONTENDERS | {"MIN", "PrioMIN"}
    # MIN never misses more than LRU on any seed: the paired cut of MIN itself is not listed (a reference) ...
    assert "MIN" not in a["summary"]["versus_lru"] and "PrioMIN" not in a["summary"]["versus_lru"]
    # ... and its mean is at most every demand-only contender's
    s = a["summary"]["policies"]
    assert s["MIN"]["dc_miss_ratio"]["value"] <= s["LRU"]["dc_miss_ratio"]["value"]
    assert s["PrioMIN"]["hi_miss_ratio"]["value"] <= s["MIN"]["hi_miss_ratio"]["value"]


def test_interval_is_the_t_interval_of_the_per_seed_values(kvds_env: dict) -> None:
    """Recompute one cell from the stored per-seed figures: mean and Student-t half-width with 4 d.f."""
    out = _compare(kvds_env, "--policies", "LRU,MIN")
    per_seed = json.loads((Path(out["run"]) / "per_seed.json").read_text())
    vals = [r["dc_miss_ratio"] for r in per_seed["LRU"]]
    assert len(vals) == 5 and len(set(vals)) > 1
    mean = sum(vals) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / 4)
    est = out["summary"]["policies"]["LRU"]["dc_miss_ratio"]
    assert math.isclose(est["value"], mean, rel_tol=1e-9)
    assert math.isclose(est["hi"] - est["value"], 2.776 * sd / math.sqrt(5), rel_tol=1e-6)


def test_paired_cut_versus_lru_comes_from_the_same_seeds(kvds_env: dict) -> None:
    out = _compare(kvds_env, "--policies", "LRU,ExpectedNextUse,MIN")
    per_seed = json.loads((Path(out["run"]) / "per_seed.json").read_text())
    cuts = [1 - e["dc_miss_ratio"] / l["dc_miss_ratio"]
            for e, l in zip(per_seed["ExpectedNextUse"], per_seed["LRU"])]
    got = out["summary"]["versus_lru"]["ExpectedNextUse"]["dc_miss_cut_vs_lru"]
    assert math.isclose(got["value"], sum(cuts) / 5, rel_tol=1e-9)
    gaps = [(l["dc_miss_ratio"] - e["dc_miss_ratio"]) / (l["dc_miss_ratio"] - m["dc_miss_ratio"])
            for e, l, m in zip(per_seed["ExpectedNextUse"], per_seed["LRU"], per_seed["MIN"])]
    assert math.isclose(out["summary"]["versus_lru"]["ExpectedNextUse"]["gap_to_min_closed"]["value"], sum(gaps) / 5,
                        rel_tol=1e-9)


def test_text_table_marks_offline_bounds_and_prints_dash_for_missing(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--seeds", "5", "--policies", "LRU,MIN"], kvds_env)
    assert p.returncode == 0, p.stderr
    assert "MIN (offline bound)" in p.stdout and "offline references" in p.stdout
    lru = next(line for line in p.stdout.splitlines() if line.startswith("LRU "))
    assert " - " in lru + " "  # step p99 with < 1,000 steps is not supported by the tail rule: "-", not 0


def test_policy_parameters_make_their_own_row(kvds_env: dict) -> None:
    out = _compare(kvds_env, "--policies", "LRU,ExpectedNextUse,ExpectedNextUse:priority_weight=3")
    s = out["summary"]["policies"]
    assert "ExpectedNextUse:priority_weight=3" in s
    assert s["ExpectedNextUse:priority_weight=3"]["hi_miss_ratio"]["value"] <= s["ExpectedNextUse"]["hi_miss_ratio"]["value"]


def test_unknown_policy_parameter_is_one_line(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--policies", "ExpectedNextUse:speed=3"], kvds_env)
    assert p.returncode == 2 and "unknown parameter" in p.stderr and p.stderr.count("\n") == 1


def test_fewer_than_five_seeds_is_refused(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--seeds", "3"], kvds_env)
    assert p.returncode == 2 and "at least 5 seeds" in p.stderr


def test_sweep_rows_and_png(kvds_env: dict) -> None:
    p = run_kvds(["policy", "sweep", *FAST, "--fractions", "0.3,0.8", "--policies", "LRU,ExpectedNextUse,MIN",
                  "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out["summary"]["by_fraction"]) == {"0.3", "0.8"}
    for f in ("0.3", "0.8"):
        row = out["summary"]["by_fraction"][f]
        assert row["MIN"]["value"] <= row["LRU"]["value"]
    assert out["summary"]["by_fraction"]["0.8"]["LRU"]["value"] < out["summary"]["by_fraction"]["0.3"]["LRU"]["value"]
    png = Path(out["summary"]["png"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_tier_override_is_one_line(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", *FAST, "--tier", "slow.speed=3"], kvds_env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1


def test_speed_reports_rates_and_scaling(kvds_env: dict) -> None:
    """Figures only (timing targets belong to the verb's output, not to tests)."""
    p = run_kvds(["policy", "speed", "--events", "50000", "--repeat", "1", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)["summary"]
    assert out["events"] == 50000 and out["policy"] == "ExpectedNextUse"
    assert out["events_per_s"] > 0 and len(out["scaling"]) == 4
    assert out["target_events_per_s"] == 500_000 and isinstance(out["meets_target"], bool)  # kvds's policy's goal
    old = run_kvds(["policy", "bench", "--help"], kvds_env)  # the verb's earlier name, its one alias
    assert old.returncode == 0 and "--events" in old.stdout


def test_compare_over_a_request_trace_batched_by_seed(kvds_env: dict, tmp_path: Path) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text("arrival_s,prompt_tokens,generated_tokens,deadline_ms,priority\n"
                   + "".join(f"{i * 0.05:.2f},{100 + 37 * i},{12 + i},2000,{(i * 29) % 101}\n" for i in range(8)))
    for flag in ("--requests", "--trace"):
        p = run_kvds(["policy", "compare", flag, str(csv), "--seeds", "5", "--policies", "LRU,IntentAware",
                      "--json"], kvds_env)
        assert p.returncode == 0, p.stderr
        summary = json.loads(p.stdout)["summary"]["policies"]
        assert summary["LRU"]["dc_accesses"]["value"] > 0
        assert summary["LRU"]["dc_miss_ratio"]["lo"] is not None  # five different batchings: an interval


def test_compare_on_an_npz_trace_runs_once_without_an_interval(kvds_env: dict, tmp_path: Path) -> None:
    npz = tmp_path / "t.npz"
    g = run_kvds(["policy", "generate", *FAST, "--seed", "4", "--out", str(npz)], kvds_env)
    assert g.returncode == 0, g.stderr
    p = run_kvds(["policy", "compare", "--trace", str(npz), "--policies", "LRU,MIN", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    est = json.loads(p.stdout)["summary"]["policies"]["LRU"]["dc_miss_ratio"]
    assert est["value"] > 0 and est["lo"] is None   # one fixed trace: a point, not a fake interval


def test_compare_on_the_prototype_seed_jsonl(kvds_env: dict) -> None:
    p = run_kvds(["policy", "compare", "--trace", str(SAMPLE), "--policies", "LRU,ExpectedNextUse,MIN", "--json"],
                 kvds_env)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["summary"]["policies"]
    assert s["MIN"]["dc_miss_ratio"]["value"] <= s["LRU"]["dc_miss_ratio"]["value"]


def test_trace_errors_name_file_and_line(kvds_env: dict, tmp_path: Path) -> None:
    csv = tmp_path / "req.csv"
    csv.write_text("arrival_s,prompt_tokens,generated_tokens\n0,10,5\n0.1,ten,5\n")
    for flag in ("--requests", "--trace"):
        p = run_kvds(["policy", "compare", flag, str(csv)], kvds_env)
        assert p.returncode == 2 and "req.csv:3:" in p.stderr and p.stderr.count("\n") == 1
    bad = tmp_path / "proto.jsonl"
    lines = SAMPLE.read_text().splitlines(keepends=True)[:3]
    bad.write_text(lines[0] + lines[1].replace('"size_bytes": 65536', '"size_bytes": -5') + lines[2])
    p = run_kvds(["policy", "sweep", "--trace", str(bad), "--policies", "LRU"], kvds_env)
    assert p.returncode == 2 and "proto.jsonl:2" in p.stderr and p.stderr.count("\n") == 1
    junk = tmp_path / "t.npz"
    junk.write_bytes(b"not a zip")
    p = run_kvds(["policy", "compare", "--trace", str(junk)], kvds_env)
    assert p.returncode == 2 and "t.npz" in p.stderr and p.stderr.count("\n") == 1
    p = run_kvds(["policy", "compare", "--trace", str(tmp_path / "missing.npz")], kvds_env)
    assert p.returncode == 2 and "does not exist" in p.stderr
