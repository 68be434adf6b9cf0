"""The host-load meter (io_priority/host_load.py) on this real host: other work outside kvds's process tree is
counted as foreign CPU, kvds's own children are not. The burners run for a fixed CPU time (not wall time), so
the figures hold however busy the machine is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from io_priority import host_load, load_rule
from io_priority.workload import RepResult
from tests.conftest import run_kvds

CPU_S = 0.5
BURN = f"import time\nwhile time.process_time() < {CPU_S}: pass\n"


def test_own_children_are_not_foreign_and_an_orphaned_hog_is() -> None:
    own = host_load.LoadMeter()
    own.start()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # kvds's own child: reaped, counted as ours
    mine = own.stop()
    other = host_load.LoadMeter()
    other.start()
    # a grandchild orphaned at once: reparented away from this process, so its CPU time is someone else's
    pid = int(subprocess.run(["sh", "-c", f"{sys.executable} -c '{BURN}' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    theirs = other.stop()
    assert mine.own_cores * mine.seconds >= 0.9 * CPU_S        # the child's CPU is kvds's own ...
    assert theirs.own_cores * theirs.seconds < 0.5 * CPU_S     # ... the orphan's is not,
    assert theirs.foreign_cores * theirs.seconds >= 0.9 * CPU_S  # it is other work
    assert 0 <= mine.steal_share <= 1


def test_a_sample_is_busy_above_either_threshold() -> None:
    quiet = host_load.LoadSample(5.0, 0.01, 0.9, 0.0, 0.0, 0.2)
    busy = host_load.LoadSample(5.0, 1.2, 0.9, 0.0, 0.4, 3.6)
    stolen = host_load.LoadSample(5.0, 0.01, 0.9, 0.2, 0.0, 0.2)
    assert busy.as_dict()["busy"] is True and quiet.as_dict()["busy"] is False and stolen.busy


# ---- the load rule (io_priority/load_rule.py): which repetitions a verdict rests on ------------------------------

QUIET = host_load.LoadSample(6.0, 0.01, 0.9, 0.0, 0.0, 0.2)
BUSY = host_load.LoadSample(6.0, 1.2, 0.9, 0.0, 0.4, 3.6)


def _rep(sample: host_load.LoadSample | None) -> RepResult:
    return RepResult(np.arange(10, dtype=np.int64), {"reads": 10, "errors": 0, "late": 0}, None, None,
                     host_load=sample)


def _point(status: str) -> dict:
    return {"scheduler": "mq-deadline", "variant": "spill-v2", "goal": {"status": status, "text": ["t"]},
            "meets_goal": status == "met"}


def _runs(busy: dict[str, set[int]], reps: int = 4) -> load_rule.SchedRuns:
    labels = ("unloaded", "baseline", "spill-v2")
    order = [(r, label) for r in range(reps) for label in (labels if r % 2 == 0 else labels[::-1])]
    results = {label: [_rep(BUSY if r in busy.get(label, set()) else QUIET) for r in range(reps)] for label in labels}
    return load_rule.SchedRuns(results, order)


def test_a_quiet_run_keeps_its_verdict_and_says_what_it_rests_on() -> None:
    calls = []
    pts = load_rule.judge_points([_point("met")], {"mq-deadline": _runs({})}, lambda sub: calls.append(sub) or [])
    assert calls == []  # nothing to set aside: judged once, from every repetition
    load = pts[0]["goal"]["load"]
    assert pts[0]["goal"]["status"] == "met" and load["busy_reps"] == 0 and load["reps"] == 12
    assert load["verdict"] == "met on stall-free, unloaded repetitions (all 12)"


def test_busy_repetitions_are_set_aside_and_the_point_judged_from_the_quiet_ones() -> None:
    runs = _runs({"unloaded": {1}, "spill-v2": {2}})
    seen = {}

    def quiet_points(sub):
        seen.update(sub)
        return [{**_point("missed"), "goal": {"status": "missed", "text": ["from quiet"]}}]

    pts = load_rule.judge_points([_point("met")], {"mq-deadline": runs}, quiet_points)
    q = seen["mq-deadline"]
    assert [len(q.results[label]) for label in ("unloaded", "baseline", "spill-v2")] == [3, 4, 3]
    assert (1, "unloaded") not in q.order and (2, "spill-v2") not in q.order and len(q.order) == 10
    assert all(r.host_load is QUIET for reps in q.results.values() for r in reps)
    g = pts[0]["goal"]
    assert g["status"] == "missed" and g["text"] == ["from quiet"]  # the quiet repetitions' verdict and interval
    assert g["load"]["verdict"] == "missed on stall-free, unloaded repetitions (10 of 12; 2 on a busy host set aside)"


def test_too_few_quiet_repetitions_is_not_judged_never_a_flip() -> None:
    runs = _runs({"unloaded": {0, 1}, "spill-v2": {3}})  # the reference keeps 2 < MIN_REPS quiet repetitions
    pts = load_rule.judge_points([_point("met")], {"mq-deadline": runs}, lambda sub: [])
    g = pts[0]["goal"]
    assert g["status"] == "inconclusive" and g["all_reps_status"] == "met" and not pts[0]["meets_goal"]
    assert g["load"]["verdict"].startswith("not judged: host busy (3 of 12 repetitions busy")
    assert load_rule.not_judged(pts[0])


def test_a_real_bench_beside_a_cpu_hog_is_not_judged(kvds_env: dict[str, str]) -> None:
    """A real bench (loop device, three variants x 3 repetitions) while an orphaned CPU hog runs: every
    repetition records the hog as other work, and the verdict says the host was busy instead of judging."""
    hog = subprocess.Popen(["sh", "-c", "sh -c 'while :; do :; done' & echo $!"], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    pid = int(hog.stdout.readline())
    hog.wait()
    try:
        res = run_kvds(["io", "bench", "--mapping", "spill-v2", "--duration", "1", "--reps", "3", "--kv-mib", "32",
                        "--spill-mib", "64", "--no-trace", "--json"], kvds_env, timeout=400)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)["summary"]
    for mode in summary["modes"].values():
        load = mode["host_load"]
        assert len(load["per_rep"]) == 3 and load["busy_reps"] == 3
        assert all(s["foreign_cores"] > host_load.FOREIGN_CORES_LIMIT and s["busy"] for s in load["per_rep"])
    v = summary["goal"]["verdicts"]["separated"]
    assert v["status"] == "inconclusive" and v["load"]["verdict"].startswith("not judged: host busy (9 of 9")
    assert summary["goal"]["not_judged_host_busy"] == ["mq-deadline/separated"]
    assert summary["config"]["block_trace"] == "not recorded (--no-trace)"
