"""`kvds replay` on the real kernel: the seed JSONL replays with a loop device and a memory cgroup."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SEED_TRACE, needs_root, run_kvds


@needs_root
@pytest.mark.skipif(shutil.which("losetup") is None, reason="losetup is not installed")
def test_seed_trace_replays_on_the_real_kernel(kvds_env: dict, tmp_path: Path) -> None:
    Path(kvds_env["KVDS_WORK_DIR"]).mkdir(parents=True, exist_ok=True)
    p = run_kvds(["replay", "--trace", str(SEED_TRACE), "--policy", "LRU,DeadlineAware", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    lru, da = out["rows"]["LRU"], out["rows"]["DeadlineAware"]
    assert lru["dc_accesses"] == da["dc_accesses"] == 153  # the sample's accesses: tests/data/README.md
    assert lru["real_p99_us"] > 0 and lru["miss_read_p50_us"] > 0
    assert out["memcg"]["limit_bytes"] > 0
    # the journal put everything back: no loop device over our scratch file, no replay cgroup left
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert kvds_env["KVDS_WORK_DIR"] not in loops
    memcg = Path("/sys/fs/cgroup/memory")
    assert not [d for d in memcg.glob("kvds-*-replay") if d.is_dir()] if memcg.is_dir() else True


def test_replay_of_a_bad_trace_is_one_line(kvds_env: dict, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 0, "event_type": "ALLOCATED", "intent": {"request_id": "r"}}\n')
    p = run_kvds(["replay", "--trace", str(bad)], kvds_env)
    assert p.returncode == 2 and "bad.jsonl:1:" in p.stderr and p.stderr.count("\n") == 1
