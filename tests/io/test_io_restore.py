"""After `kvds io bench` the loop device, its scheduler and scratch files are gone: on a normal exit, and after
SIGKILL of the kvds process (its ioload workers die with it) followed by one `kvds restore`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness import doctor
from tests.conftest import journals_of

pytestmark = [doctor.skip_unless("loop", "ioprio"),
              doctor.skip_unless("root")]


def _loops_over(tmp_path: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if str(tmp_path) in line]


def _kvds(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def test_normal_run_leaves_nothing(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    proc = subprocess.Popen(_kvds("io", "bench", "--mode", "unloaded,separated", "--scheduler", "bfq", "--duration",
                                  "0.5", "--reps", "1", "--kv-mib", "16", "--spill-mib", "32", "--json",
                                  "--verbose"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kvds_env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    env = json.loads(res.stdout)  # harness/emit.py's envelope
    doc = {"run": env["run"], **env["summary"]}
    assert doc["config"]["scheduler"] == "bfq"
    assert doc["modes"]["separated"]["reads"] > 0
    assert Path(doc["run"], "samples", "unloaded.npy").exists()
    # the commands underneath: each ioload started is in meta.json, in the order run, and --verbose printed it
    cmds = json.loads(Path(doc["run"], "meta.json").read_text())["commands"]
    assert [(c["variant"], c["rep"], sorted(set(c) & {"reader", "writer"})) for c in cmds] == \
        [("unloaded", 0, ["reader"]), ("separated", 0, ["reader", "writer"])]
    dev = doc["config"]["device"]["path"]
    for c in cmds:
        assert c["reader"][1] == "reader" and c["reader"][c["reader"].index("--dev") + 1] == dev
        assert "running (ioload reader): " + c["reader"][0] in err
    assert cmds[1]["writer"][1] == "writer" and "running (ioload writer)" in err
    assert _loops_over(tmp_path) == []
    assert not any((tmp_path / "work").glob("io-*"))
    assert journals_of(proc.pid) == []


def test_dry_run_prints_what_would_run_and_changes_nothing(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    res = subprocess.run(_kvds("io", "bench", "--dry-run", "--mapping", "spill-v2", "--reps", "2", "--json"),
                         capture_output=True, text=True, env=kvds_env, timeout=60)
    assert res.returncode == 0, res.stderr
    env = json.loads(res.stdout)
    assert env["run"] is None and env["summary"]["schema"] == "kvds.io-bench-plan/1"
    plan = env["summary"]
    assert [tuple(x) for x in plan["rep_order"]] == [(0, "unloaded"), (0, "baseline"), (0, "separated"),
                                                     (1, "separated"), (1, "baseline"), (1, "unloaded")]
    roles = [sorted(set(c) & {"reader", "writer"}) for c in plan["commands"]]
    assert roles == [["reader"]] + [["reader", "writer"]] * 4 + [["reader"]]
    sep = plan["commands"][2]["writer"]
    assert sep[sep.index("--pace") + 1] == "deadline" and sep[sep.index("--dev") + 1] == "<loop device>"
    # nothing set up, started or filed
    assert _loops_over(tmp_path) == []
    assert not any((tmp_path / "work").glob("io-*")) and not any((tmp_path / "results").glob("*"))
    text = subprocess.run(_kvds("io", "bench", "--dry-run", "--reps", "1"), capture_output=True, text=True,
                          env=kvds_env, timeout=60)
    assert text.returncode == 0 and "nothing was set up or started (--dry-run)" in text.stdout


def test_sigkill_then_restore(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    """kill -9 of kvds alone (not its process group): its ioload workers die with it, one restore cleans up."""
    proc = subprocess.Popen(_kvds("io", "bench", "--mode", "baseline", "--duration", "30", "--reps", "1",
                                  "--kv-mib", "16", "--spill-mib", "32", "--scheduler", "kyber"),
                            env=kvds_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        loops: list[str] = []
        while time.monotonic() < deadline and not loops:
            time.sleep(0.2)
            loops = _loops_over(tmp_path)
        assert loops, "the benchmark never attached its loop device"
        sched = Path(f"/sys/block/{Path(loops[0]).name}/queue/scheduler")
        while time.monotonic() < deadline and "[kyber]" not in sched.read_text():
            time.sleep(0.1)
        while time.monotonic() < deadline and len(psutil.Process(proc.pid).children()) < 2:
            time.sleep(0.1)  # the reader and the writer
        workers = psutil.Process(proc.pid).children()
        assert len(workers) == 2, workers
    finally:
        proc.kill()  # kvds only: its workers must follow by themselves
        proc.wait()
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert alive == [], f"ioload workers outlived their kvds process: {alive}"
    # (the loop device stays until a restore; another test session starting now may already have restored it)
    res = subprocess.run(_kvds("restore"), capture_output=True, text=True, env=kvds_env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert _loops_over(tmp_path) == []
    assert not any((tmp_path / "work").glob("io-*"))
    assert journals_of(proc.pid) == []
