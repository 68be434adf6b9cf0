"""Policies run in worker processes (kv_policy/parallel.py) give exactly the metrics of the same policies run in
this process, in the caller's order, with the Python-loop rows started first."""
from __future__ import annotations

import json

from kv_policy import parallel
from kv_policy.compare import build
from kv_policy.generator import generate
from kv_policy.metrics import run_metrics
from kv_policy.profiles import get_profile
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from tests.conftest import run_kvds

SPECS = ["LRU", "ExpectedNextUse", "vLLM-prefix", "DeadlineAware", "MIN", "ExpectedNextUse:priority_weight=1.5"]


def test_workers_report_what_one_process_computes() -> None:
    t = generate(get_profile("rag_mixed_priority"), 2, 30_000)
    tiers = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    calls = []
    got = parallel.metrics_per_policy(t, tiers, SPECS, 2, build, lambda: calls.append(1))
    assert list(got) == SPECS and len(calls) == len(SPECS)
    for spec in SPECS:
        ref = run_metrics(simulate(t, build(spec), tiers), t)
        assert json.dumps(got[spec], sort_keys=True) == json.dumps(ref, sort_keys=True), spec
    assert got["LRU"]["dc_misses"] != got["ExpectedNextUse"]["dc_misses"]  # distinct rows, not one copied


def test_python_loop_rows_start_first_and_short_traces_stay_in_process() -> None:
    assert parallel.slowest_first(SPECS, build) == ["ExpectedNextUse", "DeadlineAware",
                                                    "ExpectedNextUse:priority_weight=1.5", "LRU", "vLLM-prefix", "MIN"]
    t = generate(get_profile("balanced"), 0, 5_000)
    assert parallel.jobs_for(t, 0, 8) == 1 and parallel.jobs_for(t, 3, 8) == 3 and parallel.jobs_for(t, 4, 2) == 2


def test_compare_with_workers_files_the_same_summary(kvds_env: dict) -> None:
    args = ["policy", "compare", "--profile", "balanced", "--set", "n_requests=6", "--set", "gen_tokens=16:64",
            "--seeds", "5", "--policies", "LRU,ExpectedNextUse,MIN", "--json"]
    one = run_kvds(args + ["--jobs", "1"], kvds_env)
    two = run_kvds(args + ["--jobs", "2"], kvds_env)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert "Traceback" not in two.stderr and "_Terminated" not in two.stderr, two.stderr   # idle workers end quietly
    assert json.loads(one.stdout)["summary"] == json.loads(two.stdout)["summary"]
    bad = run_kvds(args + ["--jobs", "-1"], kvds_env)
    assert bad.returncode == 2 and "--jobs -1" in bad.stderr and "Traceback" not in bad.stderr


def test_a_failing_worker_raises_in_the_parent_and_leaves_no_process() -> None:
    """A policy whose worker fails: the parent raises with the worker's error, and no worker is left running (every
    worker is forked from the caller's thread and joined; multiprocessing.Pool once left one waiting forever)."""
    import os

    import psutil
    import pytest

    t = generate(get_profile("balanced"), 0, 5_000)
    tiers = for_trace(t, DEFAULT_FAST, DEFAULT_SLOW, int(t.peak_live_bytes() * 0.3))
    parent = os.getpid()

    def fails_in_a_worker(spec: str):
        if spec == "MIN" and os.getpid() != parent:
            raise ValueError("no MIN in this worker")
        return build(spec)

    with pytest.raises(parallel.WorkerError, match="policy MIN: ValueError: no MIN in this worker"):
        parallel.metrics_per_policy(t, tiers, ["LRU", "MIN", "vLLM-prefix"], 2, fails_in_a_worker)
    assert not [c for c in psutil.Process().children() if c.is_running() and c.status() != "zombie"]
