"""`kvds policy replay` on the real kernel: the seed JSONL replays with a loop device and a memory cgroup."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


from harness.knobs.cgroups import hierarchy_for
from tests.conftest import KVDS, REPO, SEED_TRACE, journals_of, needs_root, needs_tool, run_kvds


@needs_root
@needs_tool("losetup", "replay runs on a loop device")
def test_seed_trace_replays_on_the_real_kernel(kvds_env: dict, tmp_path: Path) -> None:
    Path(kvds_env["KVDS_WORK_DIR"]).mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([*KVDS, "policy", "replay", "--trace", str(SEED_TRACE), "--policy", "LRU,DeadlineAware",
                             "--json"],
                            cwd=REPO, env=kvds_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    out = json.loads(stdout)["summary"]
    lru, da = out["rows"]["LRU"], out["rows"]["DeadlineAware"]
    assert lru["dc_accesses"] == da["dc_accesses"] == 153  # the sample's accesses: tests/data/README.md
    assert lru["real_p99_us"] > 0 and lru["miss_read_p50_us"] > 0
    # the arena really lived in the replay's memory cgroup, whichever cgroup version holds the memory controller
    # here (this host: v1 only; a v2 host reports memory.peak where the kernel has it)
    version, root = hierarchy_for("memory")
    memcg = out["memcg"]
    assert memcg["limit_bytes"] > 0
    if version == 1:
        assert 0 < memcg["max_usage_bytes"] <= memcg["limit_bytes"], memcg
        assert memcg["failcnt"] == 0, memcg  # the limit (arena + margin) was never hit
    else:
        assert memcg["limit_bytes"] < 1 << 60, memcg  # a number, not "max"
        if Path(root, "memory.peak").exists() or any(root.glob("*/memory.peak")):
            assert 0 < memcg["peak_bytes"] <= memcg["limit_bytes"], memcg
    # the journal put everything back: no loop device over our scratch file, this run's cgroup gone, no journal
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert kvds_env["KVDS_WORK_DIR"] not in loops
    assert not (root / f"kvds-{proc.pid}-replay").exists()
    assert journals_of(proc.pid) == []


def test_replay_of_a_bad_trace_is_one_line(kvds_env: dict, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 0, "event_type": "ALLOCATED", "intent": {"request_id": "r"}}\n')
    p = run_kvds(["policy", "replay", "--trace", str(bad)], kvds_env)
    assert p.returncode == 2 and "bad.jsonl:1:" in p.stderr and p.stderr.count("\n") == 1
