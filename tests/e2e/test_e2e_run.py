"""`kvds e2e` on the real kernel at its smallest: the four cells run, the intent cells madvise and pace the spill
tenant while the others do not, the tenants really load the memory cgroup and the device, and the journal puts
everything back; and a SIGKILL mid-run followed by one `kvds restore` leaves the host as found (the pattern of
tests/io/test_io_restore.py). Run under /tmp/kvds-kernel.lock (loop device, zram swap, cgroups)."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psutil

from harness import doctor
from harness.knobs.cgroups import hierarchy_for
from harness.knobs.swap import active_swaps
from tests.conftest import KVDS, REPO, journals_of

pytestmark = [doctor.skip_unless("root"), doctor.skip_unless("loop", "memcg", "swap.zram", "io.ioload")]

SMALL = ["--steps", "40", "--block-kib", "8", "--spill-region", "32M", "--hog-mib", "16"]


def _loops_over(path: Path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line.split(":")[0] for line in out.splitlines() if str(path) in line]


def _host_state(pid: int, work: Path) -> dict:
    """What a run changes and must give back: its loop devices, its cgroups, swap devices, journals, scratch files."""
    groups = []
    for ctrl in ("memory", "blkio"):
        _, root = hierarchy_for(ctrl)
        groups += sorted(p.name for p in root.glob(f"kvds-{pid}-*"))
    return {"loops": _loops_over(work), "cgroups": groups, "swaps": sorted(active_swaps()),
            "journals": journals_of(pid), "scratch": sorted(str(p) for p in work.glob("*e2e*"))}


def test_the_four_cells_run_and_leave_nothing(kvds_env: dict[str, str]) -> None:
    work = Path(kvds_env["KVDS_WORK_DIR"])
    work.mkdir(parents=True, exist_ok=True)
    swaps = sorted(active_swaps())
    delayacct = Path("/proc/sys/kernel/task_delayacct").read_text()
    unkillable = subprocess.run(["sh", "-c", "echo -1000 > /proc/self/oom_score_adj"],
                                capture_output=True).returncode == 0
    # what keeps kvds in its squeezed groups here (e2e/stack.py keeper): unkillable, else on cgroup v1 the guard
    kept_by = "oom_score_adj" if unkillable else "oom_guard" if hierarchy_for("memory")[0] == 1 else None
    proc = subprocess.Popen([*KVDS, "e2e", *SMALL, "--reps", "2", "--json"], cwd=REPO, env=kvds_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    s = json.loads(out)["summary"]
    cells = s["cells"]
    assert list(cells) == ["LRU / no intents", "LRU / intents", "ExpectedNextUse / no intents",
                           "ExpectedNextUse / intents"]
    for name, c in cells.items():
        assert c["reps"] == 2 and c["tpot_p99_us"]["value"] > 0, name
        # the squeeze acts in every repetition of every cell, not only after the limit is first set: reclaim takes
        # arena pages and the replay reads them back from swap (kvds's own major faults, the group's refaults)
        for r in c["squeeze_per_rep"]:
            assert r["swap_ins"] > 0 and r["workingset_refault_anon"] > 0, (name, r)
            assert r["at_limit"]["charge"] <= s["setup"]["memcg_limit_bytes"], (name, r)
            # kvds sits in the group (its references and intents count there) where something keeps the group's
            # OOM killer off it (e2e/stack.py Squeeze)
            assert r["owner_in_group"] == (kept_by is not None) and r.get("kept_by") == kept_by, (name, r)
        assert (c["madvised_blocks"] > 0) == c["intents"], (name, c["madvised_blocks"])
        assert c["slow_tier_bytes"]["value"] >= c["replay_slow_bytes"] > 0, name
        assert c["sim_tpot_p99_us"] > 0 and c["measured_to_sim_p99"]["value"] > 0, name
        # the simulation with swap-ins adds their measured cost (the squeeze acted: swap-ins > 0 above)
        assert s["setup"]["swap_in_cost"]["valid"] and c["sim_swap_in_tpot_p99_us"] > c["sim_tpot_p99_us"], name
        # where the time went, per decode step (e2e/step_stalls.py): measured in every repetition (the replay runs
        # in a thread created with delay accounting on); the squeeze's swap-ins show as the replay thread's swap-in
        # delay, and the simulation with each step's memory stalls added predicts at least the plain p99
        st = c["stalls"]
        assert st["reps"] == 2 and st["per_step_us"]["swapin"] > 0 and st["per_step_us"]["reclaim"] > 0, (name, st)
        assert c["sim_memory_tpot_p99_us"] >= c["sim_tpot_p99_us"], name
    # the intent cells' ioprio classes came from the mapping, the others' from none
    assert s["setup"]["io_classes"]["LRU / intents"]["critical_read"] == "rt/0"
    assert s["setup"]["io_classes"]["LRU / no intents"]["critical_read"] == "None"
    # the memory limit sat below the arena: the cgroup hit it in every cell
    assert 0 < s["setup"]["memcg_limit_bytes"] < s["setup"]["arena_bytes"]
    assert all(c["memcg_failcnt"]["value"] > 0 for c in cells.values())
    assert [w["cell"] for w in s["warmup"]] == ["LRU / no intents"]  # one unmeasured warm-up, in no figure
    assert s["tenants"]["hog_measured"]["passes"] > 0
    cmds = json.loads((Path(json.loads(out)["run"]) / "commands.json").read_text())["commands"]
    for c in cmds:
        paced = "--pace" in c["writer"]
        assert paced == c["cell"].endswith("/ intents"), c
    assert set(s["goals"]) == {"tpot_p99_ratio", "slo_high_gain_points", "goodput_ratio"}
    assert all(g["status"] == "inconclusive" for g in s["goals"].values())  # two repetitions: no interval
    assert _host_state(proc.pid, work) == {"loops": [], "cgroups": [], "swaps": swaps, "journals": [],
                                           "scratch": []}
    assert Path("/proc/sys/kernel/task_delayacct").read_text() == delayacct  # the journal switched it back
    # the report leads with the factorial table: its first table
    out_dir = work.parent / "report"
    rep = subprocess.run([*KVDS, "report", json.loads(out)["run"], "--out", str(out_dir)], cwd=REPO, env=kvds_env,
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    md = (out_dir / "report.md").read_text()
    first_table = next(line for line in md.splitlines() if line.startswith("|"))
    assert first_table.startswith("| cell | TPOT p50 (ms) | TPOT p99 (ms) | high-prio SLO"), first_table
    assert "e2e tpot_p99_ratio" in json.loads((out_dir / "report.json").read_text())["verdicts"][
        next(iter(json.loads((out_dir / "report.json").read_text())["verdicts"]))]


def test_sigkill_then_one_restore_leaves_the_host_as_found(kvds_env: dict[str, str]) -> None:
    work = Path(kvds_env["KVDS_WORK_DIR"])
    work.mkdir(parents=True, exist_ok=True)
    swaps = sorted(active_swaps())
    proc = subprocess.Popen([*KVDS, "e2e", *SMALL, "--reps", "20"], cwd=REPO, env=kvds_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the hog and a spill tenant: the cells are running
            workers = psutil.Process(proc.pid).children()
            if len(workers) >= 2:
                break
            time.sleep(0.2)
        assert len(workers) >= 2, "the run never started its tenants"
        changed = _host_state(proc.pid, work)
        # kvds's own group, the hog's, the spill cap and at least one repetition's squeezed group
        assert changed["loops"] and len(changed["cgroups"]) >= 4 and changed["swaps"] != swaps, changed
    finally:
        proc.kill()  # kvds alone: its workers must follow by themselves
        proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert alive == [], f"tenants outlived their kvds process: {alive}"
    res = subprocess.run([*KVDS, "restore"], cwd=REPO, env=kvds_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert _host_state(proc.pid, work) == {"loops": [], "cgroups": [], "swaps": swaps, "journals": [],
                                           "scratch": []}
