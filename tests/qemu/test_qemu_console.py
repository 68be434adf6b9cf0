"""The splat detector on consoles captured from this harness's own guests (tests/data/qemu/*.log):
a clean validate run, an LKDTM WARNING, an LKDTM BUG (oops), an RCU stall from the old i440fx machine, and the
first 2,120 lines of a guest whose memory cgroup livelocked a fault in the OOM killer (oom-livelock.log.gz: `kvds vm
overcommit` before its memcg mechanism put the limit on a parent group)."""

from __future__ import annotations

import gzip
import subprocess
import time
from pathlib import Path

import pytest

from qemu_validation.boot import console, runner
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "qemu"


def _scan(name: str) -> list[console.Finding]:
    return console.scan((DATA / name).read_text())


def test_clean_run_has_no_findings() -> None:
    assert _scan("validate-pass.log") == []
    # the whole kernel log of a passing validate (KUnit, kmemleak's start and its empty scans): still nothing
    text = (DATA / "validate-pass-dmesg.log").read_text()
    assert "kmemleak: Kernel memory leak detector initialized" in text and _scan("validate-pass-dmesg.log") == []


def test_warn_is_one_finding_with_its_site() -> None:
    (f,) = _scan("lkdtm-warning.log")
    assert f.kind == "warn" and "drivers/misc/lkdtm/bugs.c:112" in f.line
    assert "lkdtm_WARNING" in f.context


def test_bug_and_its_oops_are_one_report() -> None:
    found = _scan("lkdtm-bug.log")
    assert [f.kind for f in found] == ["bug"]
    assert found[0].line.startswith("kernel BUG at drivers/misc/lkdtm/bugs.c:105")


def test_rcu_stall_is_found() -> None:
    found = _scan("rcu-stall-acpi-i440fx.log")
    assert found and found[0].kind == "stall"


@pytest.mark.parametrize("line,kind", [
    ("[   12.345678] BUG: KASAN: slab-use-after-free in mm_intent_drop_space+0x8c/0x1a0", "kasan"),
    ("WARNING: possible circular locking dependency detected", "lockdep"),
    ("WARNING: possible recursive locking detected", "lockdep"),
    ("BUG: sleeping function called from invalid context at mm/slub.c:4100", "lockdep"),
    ("[    3.1] [T1] Kernel panic - not syncing: Attempted to kill init!", "panic"),
    ("Oops: general protection fault, probably for non-canonical address 0xdffffc0000000001", "oops"),
    ("UBSAN: shift-out-of-bounds in lib/x.c:1:2", "ubsan"),
    ("[    9.1] INFO: trying to register non-static key.", "lockdep"),
    ("[   88.2] kmemleak: 3 new suspected memory leaks (see /sys/kernel/debug/kmemleak)", "kmemleak"),
    ("kmemleak: Kernel memory leak detector disabled", "kmemleak"),
    ("kmemleak: Cannot allocate a kmemleak_object structure", "kmemleak"),
    ("kmemleak: Automatic memory scanning thread started", None),
    ("kmemleak: Kernel memory leak detector initialized (mem pool available: 15716)", None),
    ("kvds: all fine, no BUGs here", None),
    ("mm_intent: WARNING counts: 0", None),
])
def test_classify_lines(line: str, kind: str | None) -> None:
    assert console.classify(console.strip_prefix(line)) == kind


def test_command_output_between_markers() -> None:
    text = "boot noise\nKVDS-GUEST-START\nhello\nworld\nKVDS-GUEST-STATUS: 0\n"
    assert runner.command_output(text) == "hello\nworld"
    assert runner.reported_status(text, 1) == 0
    assert runner.reported_status("KVDS-GUEST-STATUS: 200\n", 255) == 200   # marker wins when the 7 bits agree
    assert runner.reported_status("KVDS-GUEST-STATUS: 5\n", 0) is None      # QEMU exit 0: panic, no report


def test_kasan_report_from_the_broken_variant() -> None:
    """Captured from `kvds qemu validate` on mm_intent + kernel_patches/broken-uaf."""
    found = _scan("broken-uaf-kasan.log")
    assert [f.kind for f in found] == ["kasan"]
    assert "slab-use-after-free in mm_intent_drop_space" in found[0].line


def test_lockdep_report_from_the_inverted_locks_variant() -> None:
    """Captured from `kvds qemu validate` on mm_intent + kernel_patches/broken-lockdep: one report, one finding."""
    found = _scan("broken-lockdep.log")
    assert [f.kind for f in found] == ["lockdep"]
    assert found[0].line == "WARNING: possible circular locking dependency detected"
    assert "mm_intent_dump_lock" in found[0].context and "mm_intent_register_write" in found[0].context


def test_kmemleak_report_from_the_leaking_variant() -> None:
    """Captured from `kvds qemu validate` on mm_intent + kernel_patches/broken-leak: the guest's dmesg (kmemleak
    reports at KERN_INFO, below the console's loglevel, so validate scans dmesg too). Its initialisation line is
    not a finding; the scan's report is exactly one."""
    found = _scan("broken-leak-dmesg.log")
    assert [f.kind for f in found] == ["kmemleak"]
    assert found[0].line.startswith("kmemleak: 127 new suspected memory leaks")
    report = (DATA / "broken-leak-kmemleak.txt").read_text()
    assert report.startswith("unreferenced object ") and "mm_intent_register_write" in report


def test_uninitialized_lock_report_from_its_variant() -> None:
    """Captured from `kvds qemu validate` on mm_intent + kernel_patches/broken-lockkey: lockdep's report of a
    spinlock nobody initialized, one finding with the call chain that took it."""
    found = _scan("broken-lockkey.log")
    assert [f.kind for f in found] == ["lockdep"]
    assert found[0].line == "INFO: trying to register non-static key."
    assert "mm_intent_register_write" in (DATA / "broken-lockkey.log").read_text()


def test_a_fault_looping_in_the_oom_killer_is_one_livelock_finding() -> None:
    text = gzip.decompress((DATA / "oom-livelock.log.gz").read_bytes()).decode()
    (f,) = console.scan(text)
    assert f.kind == "oom-livelock" and f.line.endswith(f"({console.LIVELOCK_REPEATS} times)")
    assert "invoked oom-killer" in f.context and "do_swap_page" in f.context  # the report that repeats: a fault's
    # one report less: a limit write that gave up, not a livelock
    cut = text[: text.rindex(console.OOM_NO_VICTIM)]
    assert console.scan(cut) == []
    assert "looped in the OOM killer" in (runner.failure_of(None, None, False, Path("c.log"), [f]) or "")


def test_the_runner_ends_a_guest_whose_console_livelocks(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    line = console.OOM_NO_VICTIM + "..."
    # a stand-in for QEMU that writes the livelock and would then run for ten minutes
    proc = subprocess.Popen(["sh", "-c", f"for i in $(seq {console.LIVELOCK_REPEATS}); do echo '{line}' >> {log}; "
                             "done; exec sleep 600"], stdout=subprocess.PIPE)
    started = time.monotonic()
    out, timed_out = runner._wait(proc, console.LivelockWatch(log), started + 600)
    assert not timed_out and proc.returncode is not None and proc.returncode < 0  # killed, not finished


def test_the_watch_counts_a_marker_split_across_two_polls(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    marker = console.OOM_NO_VICTIM.encode()
    log.write_bytes(b"noise " + marker[:10])
    watch = console.LivelockWatch(log)
    assert not watch.poll() and watch.count == 0
    with log.open("ab") as f:
        f.write(marker[10:] + b"\n" + marker + b"\n")
    watch.poll()
    assert watch.count == 2
