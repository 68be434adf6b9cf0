"""The guest lab end to end: boot the cached debug kernel under TCG, exit statuses, share, hangs, splats,
`validate`, and the deliberately broken variant that validate must reject.

The first run builds the kernel (minutes, cached outside the checkout); later runs boot it in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.doctor import skip_unless
from qemu_validation import validate_run
from qemu_validation.boot import guest_command
from qemu_validation.kernel import build
from tests.conftest import stall_qemu_when_told

pytestmark = [skip_unless("qemu.guest"), pytest.mark.timeout(3600)]
KVDS = [sys.executable, "-m", "harness.cli"]


def test_exit_status_and_share(kernel: build.KernelBuild, tmp_path: Path) -> None:
    res = guest_command.boot_and_run(kernel.id, ["sh", "-c", "cat /sys/kernel/mm/lru_gen/enabled > /share/lru; "
                                                 "ls /sys/kernel/debug/mm_intent > /share/files; exit 3"], tmp_path,
                                     timeout=300)
    assert res.status == 3 and not res.findings and not res.timed_out, res.failure
    assert (tmp_path / "lru").read_text().strip().startswith("0x")
    assert (tmp_path / "files").read_text().split() == ["budget", "clear", "dump", "lookup", "ranges", "register",
                                                        "stats"]      # "ranges": 0008's per-range tiers and counters
    # beyond debug-exit's 7 bits
    assert guest_command.run_for_status(kernel.id, ["sh", "-c", "exit 200"], timeout=300) == 200


def test_host_root_has_a_writable_run(kernel: build.KernelBuild, tmp_path: Path) -> None:
    """Under --host-root the host's / is read-only over 9p; /run must be the guest's own tmpfs (kvds keeps its
    machine-wide state there), while the host's files stay untouchable."""
    script = f"touch /run/kvds-probe && ! touch /etc/kvds-probe 2>/dev/null && echo ok > {tmp_path}/out"
    assert guest_command.run_for_status(kernel.id, ["sh", "-c", script], tmp_path, host_root=True, timeout=300) == 0
    assert (tmp_path / "out").read_text() == "ok\n" and not Path("/etc/kvds-probe").exists()


def test_hang_is_killed(kernel: build.KernelBuild) -> None:
    res = guest_command.boot_and_run(kernel.id, ["sleep", "100000"], timeout=20)
    assert res.timed_out and res.status is None
    # the status run_for_status (`kvds qemu run`) exits with for this boot: its own test of a second 20 s boot
    # would add nothing (run_for_status is boot_and_run, then exit_status)
    assert guest_command.exit_status(res) == guest_command.TIMEOUT_STATUS


def test_warn_fails_a_run_that_exits_zero(kernel: build.KernelBuild) -> None:
    res = guest_command.boot_and_run(kernel.id,
                                     ["sh", "-c", "echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT; true"],
                                     timeout=300)
    assert res.status == 0 and [f.kind for f in res.findings] == ["warn"], res.failure
    assert not res.ok and "warn" in (res.failure or "")


def test_cli_run_and_bad_input(kernel: build.KernelBuild) -> None:
    ok = subprocess.run([*KVDS, "qemu", "run", "--kernel", kernel.id, "--", "sh", "-c", "exit 5"],
                        capture_output=True, text=True, timeout=600)
    assert ok.returncode == 5, ok.stderr
    for argv in (["qemu", "run", "--kernel", kernel.id], ["qemu", "build", "--patches", "no-such"],
                 ["qemu", "validate", "--fuzz", "-1"], ["qemu", "run", "--kernel", "zzzz", "--", "true"]):
        p = subprocess.run([*KVDS, *argv], capture_output=True, text=True, timeout=600)
        assert p.returncode == 2, (argv, p.stderr)
        assert p.stderr.startswith("kvds: error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr


def _validate(kernel_id: str, store, **counts) -> tuple[dict, object]:
    """validate's typed summary as the dict summary.json holds, which these assertions read."""
    with pytest.MonkeyPatch.context() as mp:   # filed in store (its root is the results directory)
        mp.setenv("KVDS_RESULTS_DIR", str(store.root))
        filed = validate_run.run(validate_run.ValidateConfig(kernel=kernel_id, **counts))
    return filed.summary.as_dict(), filed.run


@pytest.mark.slow   # the gate profile (146 s); make test validates on the quick profile, every check included, in
#                    the main job's qemu stage (tests/core/test_run_suite.py _check_qemu)
def test_validate_passes_on_the_series(kernel: build.KernelBuild, tmp_path: Path) -> None:
    from harness.results import ResultStore
    summary, run = _validate(kernel.id, ResultStore(tmp_path))
    assert summary["ok"], json.dumps(summary, indent=1)[:3000]
    assert summary["kernel"]["kasan_lockdep"]
    assert summary["malformed_writes"] >= 10_000 and summary["errno_mismatches"] == 0
    assert summary["valid_writes"] >= 10_000 and summary["valid_via_pidfd"] > 0
    assert summary["concurrent_ms"] >= 60_000 and summary["concurrent_processes"] > 0
    assert summary["kernel_table_rows"] >= 40 and summary["seed"]
    assert summary["splats"] == 0 and summary["tests"]["passed"] == summary["tests"]["planned"] == 13
    ks, ku = summary["kselftest"], summary["kunit"]
    assert ks["failed"] == 0 and ks["passed"] == ks["planned"] >= 15, ks
    assert ku["failed"] == 0 and ku["complete"] and ku["passed"] == ku["planned"] == 1, ku
    assert summary["kunit_cases"]["failed"] == 0 and summary["kunit_cases"]["passed"] >= 50
    assert summary["kmemleak_leaks"] == 0
    assert (run.path / "console.log").exists() and (run.path / "guest" / "ktap.txt").exists()


def test_broken_variant_fails_validate(tmp_path: Path) -> None:
    from harness.results import ResultStore
    broken = build.ensure_built(build.BuildSpec(patches=("mm_intent", "broken-uaf"), kasan=True))
    summary, _ = _validate(broken.id, ResultStore(tmp_path), fuzz=100, valid=100, concurrent=0)
    assert not summary["ok"]
    assert "kasan" in {f["kind"] for f in summary["findings"]}, summary["failure"]


def _compiled(build_log: Path) -> list[str]:
    return [line.split()[-1] for line in build_log.read_text().splitlines() if line.startswith("  CC ")]


def test_lockdep_variant_fails_validate_after_an_incremental_rebuild(kernel: build.KernelBuild,
                                                                     tmp_path: Path) -> None:
    """A series that takes two mutexes in both orders: lockdep must report it and validate must fail. Built in
    the debug kernel's own tree, so only the patched file recompiles."""
    from harness.results import ResultStore
    broken = build.ensure_built(build.BuildSpec(patches=("mm_intent", "broken-lockdep"), kasan=True))
    assert broken.info["workspace"] == kernel.info["workspace"] and broken.info["incremental"]
    compiled = _compiled(broken.dir / "build.log")
    assert "mm/mm_intent.o" in compiled and all(not c.startswith(("kernel/", "fs/", "drivers/")) for c in compiled), \
        compiled
    summary, _ = _validate(broken.id, ResultStore(tmp_path), fuzz=100, valid=100, concurrent=0)
    assert not summary["ok"]
    lockdep = [f for f in summary["findings"] if f["kind"] == "lockdep"]
    assert lockdep and "circular locking dependency" in lockdep[0]["line"], summary["failure"]


@pytest.mark.slow   # a third and fourth variant: outside make test's 30-minute budget
def test_leaking_variant_fails_validate(kernel: build.KernelBuild, tmp_path: Path) -> None:
    """A series that never frees a dropped address-space record: kmemleak's final scan must report it."""
    from harness.results import ResultStore
    broken = build.ensure_built(build.BuildSpec(patches=("mm_intent", "broken-leak"), kasan=True))
    summary, run = _validate(broken.id, ResultStore(tmp_path), fuzz=100, valid=100, concurrent=0)
    assert not summary["ok"] and summary["kmemleak_leaks"] > 0, summary["failure"]
    assert "kmemleak" in {f["kind"] for f in summary["findings"]}
    assert "mm_intent" in (run.path / "guest" / "kmemleak.txt").read_text()


@pytest.mark.slow   # a third and fourth variant: outside make test's 30-minute budget
def test_uninitialized_lock_variant_fails_validate(kernel: build.KernelBuild, tmp_path: Path) -> None:
    """A spinlock nobody initialized: lockdep's "trying to register non-static key" must fail validate."""
    from harness.results import ResultStore
    broken = build.ensure_built(build.BuildSpec(patches=("mm_intent", "broken-lockkey"), kasan=True))
    summary, _ = _validate(broken.id, ResultStore(tmp_path), fuzz=100, valid=100, concurrent=0)
    assert not summary["ok"]
    lockdep = [f for f in summary["findings"] if f["kind"] == "lockdep"]
    assert lockdep and "non-static key" in lockdep[0]["line"], summary["failure"]


@pytest.mark.slow   # a benchmark of the edit -> validated kernel loop (86 s): outside make test's 30-minute budget
def test_rebuild_time_times_a_real_one_line_rebuild_and_cleans_up(kernel: build.KernelBuild, tmp_path: Path) -> None:
    """`kvds qemu rebuild-time --quick`: the touched file really recompiles in the debug kernel's tree, the rebuilt
    kernel passes the quick validate (every check, fewer lines), the guest's time is broken down by phase from
    the real boot, and the kernels it built do not stay in the cache. (Its figures are quoted, not asserted.)"""
    from harness.results import ResultStore
    from qemu_validation import rebuild_time_run
    before = {b.id for b in build.all_builds()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVDS_RESULTS_DIR", str(ResultStore(tmp_path).root))
        timed = rebuild_time_run.run(rebuild_time_run.RebuildTimeConfig(reps=1, profile="quick"))
    out, run = timed.summary.as_dict(), timed.run
    (rep,) = out["reps"]
    assert rep["incremental"] and "mm/mm_intent.o" in rep["compiled"] and rep["validate_ok"], rep
    assert rep["malformed_writes"] >= 1_000 and rep["valid_writes"] == 1_000 and out["gate"] is False
    # Other work may add builds meanwhile (a shared machine); none of rebuild-time's own may stay.
    after = build.all_builds()
    assert rep["kernel"] not in {b.id for b in after}
    assert not [b.id for b in after if b.id not in before and "kvds-rebuild-time-series" in b.label]
    assert json.loads((run.path / "summary.json").read_text())["reps"][0]["nonce"] == rep["nonce"]
    phases = {p["phase"].strip(): p["seconds"] for p in rep["guest_phases"]}
    for name in ("KUnit suite (at boot)", "kmemleak boot scan", "validator", "validator: concurrent phase",
                 "kselftest", "KUnit results + final kmemleak scans (6 s settle included)"):
        assert name in phases, phases
    assert phases["validator: concurrent phase"] >= 5.0 and phases["KUnit results + final kmemleak scans "
                                                                    "(6 s settle included)"] >= 6.0
    top = sum(p["seconds"] for p in rep["guest_phases"] if not p["phase"].startswith(" "))
    assert abs(top - rep["guest_seconds"]) < 1.0, (top, rep["guest_seconds"])


CLIENT = '''
import ctypes, json, mmap, os, sys
from harness.intent import KVBlock, Phase
from qemu_validation import mm_intent_client as mic
P = mic.PAGE_SIZE
arena = mmap.mmap(-1, 8 * P, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
base = ctypes.addressof(ctypes.c_char.from_buffer(arena))
blocks = [KVBlock("r", i, P, Phase.DECODE if i < 2 else Phase.DONE, slack_us=10, request_priority=90)
          for i in range(8)]
reg = mic.Registry()
reg.clear()
entries = mic.arena_entries(os.getpid(), base, P, blocks)
reg.register_all(entries)
mine = [e.line() for e in reg.dump() if e.pid == os.getpid()]
hit = reg.lookup(os.getpid(), base + 3 * P)
try:
    reg.register(entries[0])
    dup = 0
except mic.MmIntentError as exc:
    dup = exc.errno
json.dump({"entries": [e.line() for e in entries], "dump": mine, "lookup": hit.line() if hit else None,
           "dup": dup, "base": base}, open(sys.argv[1], "w"))
'''


def test_client_registers_an_arena_inside_the_guest(kernel: build.KernelBuild, tmp_path: Path) -> None:
    """The user-space helper on the real interface: the host's venv run in the guest kernel (host root over 9p)."""
    import errno
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    status = guest_command.run_for_status(kernel.id, [sys.executable, str(script), str(tmp_path / "out.json")],
                                          tmp_path, host_root=True, timeout=900)
    assert status == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert len(out["entries"]) == 2 and out["dump"] == out["entries"]      # 2 critical blocks + 6 done, coalesced
    assert out["lookup"] == out["entries"][1] and out["dup"] == errno.EEXIST


@pytest.mark.slow   # two boots and a 4 s host stall each (50 s); the icount argv and clock are tested in make test
@pytest.mark.parametrize("icount_shift", [None, 0])
def test_icount_keeps_a_host_stall_out_of_guest_time(kernel: build.KernelBuild, tmp_path: Path,
                                                     icount_shift: int | None) -> None:
    """The guest times the same busy loop twice; the host stops QEMU for 4 s during the second. In real time
    (wall clock) the stall is in the guest's figure; under -icount it is not: guest time is instructions."""
    stall_s = 4.0
    share, log_dir = tmp_path / "share", tmp_path / "log"
    share.mkdir()
    loop = "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done"
    up = "cut -d' ' -f1 /proc/uptime"
    script = (f"a=$({up}); {loop}; b=$({up}); echo go > /share/go; {loop}; c=$({up}); "
              "echo $a $b $c > /share/t; cat /proc/cmdline > /share/cmdline")
    stall, stalled = stall_qemu_when_told(log_dir, share, stall_s)
    res = guest_command.boot_and_run(kernel.id, ["sh", "-c", script], share, timeout=600, log_dir=log_dir,
                                     icount_shift=icount_shift)
    stall.join(timeout=60)
    assert res.ok, res.failure
    assert len(stalled) == 1  # the host really stopped this guest's QEMU mid-loop
    a, b, c = (float(x) for x in (share / "t").read_text().split())
    extra = (c - b) - (b - a)  # the second loop's time beyond the first's
    if icount_shift is None:
        assert extra > stall_s / 2, (a, b, c)       # the stall shows in real time
    else:
        assert abs(extra) < stall_s / 4, (a, b, c)  # and not in instruction-count time
        assert "kvds.clock=icount:0" in (share / "cmdline").read_text().split()  # what a kvds inside records
