"""The quick dev-loop profile's argument handling, the phase breakdown's arithmetic, and exit-bench's reading of
boots and ratios: all host-side, no kernel (the guest runs are in tests/qemu/test_qemu_guest.py)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from harness import stats
from qemu_validation import cli, exit_bench_run, rebuild_time_run, validate_run, validate_timeline

KVDS = [sys.executable, "-m", "harness.cli", "qemu"]


def _parse(argv: list[str]) -> argparse.Namespace:
    top = argparse.ArgumentParser()
    cli.register(top.add_subparsers(dest="command"))
    return top.parse_args(["qemu", *argv])


def test_quick_profile_fills_only_what_is_not_given() -> None:
    q, f = validate_run.PROFILES["quick"], validate_run.PROFILES["full"]
    assert cli._counts(_parse(["validate"])) == (f.fuzz, f.valid, f.concurrent) == (10_000, 10_000, 60)
    assert cli._counts(_parse(["validate", "--quick"])) == (q.fuzz, q.valid, q.concurrent) == (1_000, 1_000, 5)
    assert cli._counts(_parse(["validate", "--quick", "--concurrent", "0", "--fuzz", "7"])) == (7, q.valid, 0)
    assert cli._counts(_parse(["validate", "--valid", "3"])) == (f.fuzz, 3, f.concurrent)
    assert validate_run.is_gate(f.fuzz, f.valid, f.concurrent)
    assert not validate_run.is_gate(q.fuzz, q.valid, q.concurrent) and not validate_run.is_gate(f.fuzz, f.valid, 59)


@pytest.mark.parametrize("argv", [
    ["validate", "--quick", "--fuzz", "-1"], ["validate", "--quick", "--concurrent", "x"],
    ["rebuild-time", "--quick", "--reps", "0"], ["rebuild-time", "--quick", "--fuzz", "-5"],
    ["rebuild-time", "--quick", "--reps", "1", "--source", "/no/such/linux.tar.xz"],
    ["exit-bench", "--reps", "0"], ["exit-bench", "--config", "kasan"],
    ["exit-bench", "--kernel", "0123", "--config", "base"],
    ["exit-bench", "--kernel", "0123", "--patches", "none"],
])
def test_bad_input_is_one_line_exit_2(argv: list[str]) -> None:
    p = subprocess.run([*KVDS, *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (argv, p.stdout, p.stderr)
    assert p.stderr.startswith("kvds: error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr


DMESG = """\
[    0.000000] Linux version 6.12.0 (kvds@kvds)
[    4.500000] KTAP version 1
[    4.500100] 1..1
[    4.600000]     KTAP version 1
[    4.600100]     # Subtest: mm_intent
[    9.000000]     ok 5 mm_intent_parse_pidfd
[    9.250000] ok 1 mm_intent
[   10.000000] Freeing unused kernel image (initmem) memory: 948K
[   10.500000] Run /init as init process
[   70.000000] not ok 1 something printed later, after /init
"""
MARKS = "start 11.00\nkmemleak_boot 14.00\nvalidator 30.00\nkselftest 35.50\nkmemleak 50.00\nend 50.50\n"


def test_breakdown_adds_up_to_the_wall_time() -> None:
    counters = {"fuzz_ms": 1200, "valid_ms": 1000, "concurrent_ms": 5000, "malformed_writes": 1000}
    rows = validate_timeline.breakdown(DMESG, MARKS, counters, 60.0)
    got = {r["phase"].strip(): r["seconds"] for r in rows}
    assert got["outside the kernel clock (QEMU start, firmware, decompression, exit)"] == 9.5
    assert got["kernel boot to KUnit"] == 4.5 and got["KUnit suite (at boot)"] == 4.75
    assert got["kernel boot after KUnit, to /init"] == 1.25 and got["/init to the validate script (mounts)"] == 0.5
    assert got["kmemleak boot scan"] == 3.0 and got["validator"] == 16.0 and got["kselftest"] == 5.5
    assert got["validator: concurrent phase"] == 5.0 and got["validator: interface, tables, fixed cases"] == 8.8
    top = [r["seconds"] for r in rows if not r["phase"].startswith("  ")]
    assert sum(top) == pytest.approx(60.0)
    assert [r["phase"] for r in rows][0].startswith("outside")


def test_breakdown_leaves_out_what_it_cannot_see() -> None:
    """No timestamps (printk.time off) and a script that died in the validator: only the phases both of whose
    ends were recorded, nothing guessed."""
    plain = "\n".join(line.split("] ", 1)[1] for line in DMESG.splitlines())
    rows = validate_timeline.breakdown(plain, "start 11.0\nkmemleak_boot 14.0\nvalidator oops\n", {}, 60.0)
    assert [r["phase"] for r in rows] == ["kmemleak boot scan"]
    assert validate_timeline.breakdown("", "", {}, None) == []


def test_breakdown_refuses_a_guest_clock_faster_than_the_host() -> None:
    """A TSC calibrated at a third of its rate made 903 s of guest uptime in 359 s: no breakdown from that."""
    rows = validate_timeline.breakdown(DMESG, MARKS, {}, 20.0)
    assert len(rows) == 1 and "2.52x" in rows[0]["phase"] and rows[0]["seconds"] == 20.0


def test_median_phases_keeps_order_and_counts_reps() -> None:
    per_rep = [[{"phase": "a", "seconds": 1.0}, {"phase": "b", "seconds": 5.0}],
               [{"phase": "a", "seconds": 3.0}, {"phase": "b", "seconds": 4.0}],
               [{"phase": "a", "seconds": 2.0}]]
    assert rebuild_time_run.median_phases(per_rep) == [{"phase": "a", "seconds": 2.0, "reps": 3},
                                                   {"phase": "b", "seconds": 4.5, "reps": 2}]


def test_rebuild_time_verdict_names_its_profile_and_fails_on_a_failed_validate() -> None:
    rows = [{"rep": i + 1, "total_seconds": t, "validate_ok": True} for i, t in enumerate((60.0, 62.0, 61.0))]
    v = rebuild_time_run.verdict(rows, "quick")
    assert v.status == stats.MET and "quick validate" in v.goal
    rows[1]["validate_ok"] = False
    assert rebuild_time_run.verdict(rows, "quick").status == stats.MISSED


OUT = """exit_bench warmup n=250 median_ns=9000000 p90_ns=12000000 mean_ns=9500000
exit_bench unused n=1000 median_ns=8000000 p90_ns=11000000 mean_ns=8500000
exit_bench one n=1000 median_ns=8100000 p90_ns=11000000 mean_ns=8600000
exit_bench intents_held={held} processes_holding=257
exit_bench many n=1000 median_ns=8200000 p90_ns=11000000 mean_ns=8700000
exit_bench unmap_untagged n=1000 median_ns=20000 p90_ns=25000 mean_ns=21000
exit_bench unmap_tagged n=1000 median_ns=24000 p90_ns=30000 mean_ns=25000
exit_bench unmap_last n=1000 median_ns=26000 p90_ns=31000 mean_ns=27000
exit_bench unmap_registered={unmapped} of 3
"""


def test_exit_bench_boot_reading_with_and_without_the_series() -> None:
    with_series = exit_bench_run.parse(OUT.format(held=exit_bench_run.EXPECTED_HELD, unmapped=3))
    assert exit_bench_run.boot_ok(with_series, True, 0) is None
    assert with_series["states"]["unmap_last"]["median_ns"] == 26000 and with_series["unmap_states_registered"] == 3
    assert "held" in exit_bench_run.boot_ok(exit_bench_run.parse(OUT.format(held=1000, unmapped=3)), True, 1)
    unregistered = exit_bench_run.parse(OUT.format(held=exit_bench_run.EXPECTED_HELD, unmapped=2))
    assert "2 of 3 unmap states" in exit_bench_run.boot_ok(unregistered, True, 1)   # an unmap state's intent failed
    floor = exit_bench_run.parse(OUT.format(held=0, unmapped=0))
    assert exit_bench_run.boot_ok(floor, False, 1) is None                   # the floor: registrations fail, exit 1
    assert exit_bench_run.boot_ok(exit_bench_run.parse(OUT.format(held=0, unmapped=1)), False, 1) is not None
    assert "unmap_last" in exit_bench_run.boot_ok(exit_bench_run.parse(OUT.split("exit_bench unmap_last")[0]),
                                                  True, 0)
    assert exit_bench_run.boot_ok(with_series, False, 0) is not None         # intents held on a kernel without it?
    assert "many" in exit_bench_run.boot_ok(exit_bench_run.parse(OUT.split("exit_bench many")[0]), True, 0)
    assert exit_bench_run.boot_ok(with_series, True, 0, guest_uptime=100.0, host_seconds=120.0) is None
    assert "3.00x" in exit_bench_run.boot_ok(with_series, True, 0, guest_uptime=360.0, host_seconds=120.0)


@pytest.mark.parametrize("a,b,word", [
    ([10.0, 10.2, 9.9, 10.1], [10.1, 9.9, 10.0, 10.2], "not measurably different"),
    ([12.0, 12.2, 11.9, 12.1], [10.1, 9.9, 10.0, 10.2], "higher"),
    ([8.0, 8.2, 7.9, 8.1], [10.1, 9.9, 10.0, 10.2], "lower"),
])
def test_exit_bench_difference_follows_the_interval(a: list[float], b: list[float], word: str) -> None:
    assert exit_bench_run.difference(stats.rep_mean_ratio(a, b)) == word
    assert exit_bench_run.difference(stats.rep_mean_ratio(a[:2], b[:2])).startswith("inconclusive: ")


def test_states_are_compared_boot_by_boot() -> None:
    """A slow boot slows every state in it; the paired ratio cancels it, the unpaired one does not."""
    unused = [1.0, 1.0, 5.0, 1.0]                 # boot 3: the host was busy
    many = [1.2, 1.21, 6.0, 1.19]
    paired = exit_bench_run.paired_ratio(many, unused)
    assert paired.lo > 1.0 and exit_bench_run.difference(paired) == "higher"
    assert exit_bench_run.difference(stats.rep_mean_ratio(many, unused)) == "not measurably different"
    few = exit_bench_run.difference(exit_bench_run.paired_ratio(many[:2], unused[:2]))
    assert few.startswith("inconclusive: ") and few.endswith("(point estimate)")   # harness.report.fmt's words


def test_exit_bench_files_each_boots_qemu_argv_in_meta(tmp_path) -> None:
    """exit-bench keeps the QEMU command line of every boot, in boot order, in meta.json as it goes (validate keeps
    its one boot's as commands.qemu); the rest of meta.json is left as it was."""
    from harness.results import ResultStore
    run = ResultStore(tmp_path).new_run("qemu-exit-bench", {"reps": 2})
    exit_bench_run.record_boot_argv(run, "k1", 0, ["qemu-system-x86_64", "-kernel", "a"])
    exit_bench_run.record_boot_argv(run, "k2", 0, ["qemu-system-x86_64", "-kernel", "b"])
    meta = run.meta
    assert meta["config"] == {"reps": 2}
    assert meta["commands"]["qemu_boots"] == [{"kernel": "k1", "rep": 1, "argv": ["qemu-system-x86_64", "-kernel", "a"]},
                                              {"kernel": "k2", "rep": 1, "argv": ["qemu-system-x86_64", "-kernel", "b"]}]
