"""The guest lab's typed summaries and their tables, host-side: a validate summary from a real console text and
real KTAP (as the guest writes them), an exit-bench summary from per-boot figures, and the tables render.py prints
from the very dicts summary.json and --json hold. No kernel is booted (the guest runs are in test_qemu_guest.py,
test_qemu_exit_bench.py); a KernelBuild is a plain record of a cache entry, made here without building."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.emit import envelope
from harness.results import dumps
from qemu_validation import exit_bench_run, render, validate_run
from qemu_validation.boot import console, ktap, runner
from qemu_validation.kernel import build

KTAP_OK = """KTAP version 1
1..2
# malformed_writes=10000 mismatches=0 fuzz_ms=812 fuzz_EINVAL=9000 fuzz_ESRCH=1000
ok 1 errno table
# valid_writes=10000 valid_via_pidfd=2500 kernel_table_rows=41
# concurrent_ms=60010 concurrent_ops=123456 concurrent_processes=8
ok 2 concurrent
"""
SPLAT = "[   12.0] BUG: KASAN: slab-use-after-free in mm_intent_lookup+0x1/0x2\n"


def _kernel(tmp_path: Path, kid: str = "0123456789abcdef", kasan: bool = True) -> build.KernelBuild:
    return build.KernelBuild(kid, f"label-{kid[:4]}", tmp_path / kid, {"kasan": kasan, "kernel_release": "6.12.0"})


def _boot(tmp_path: Path, console_text: str, status: int | None = 0) -> runner.BootResult:
    log = tmp_path / "console.log"
    log.write_text(console_text)
    return runner.BootResult.of(status, 0, False, 42.5, log, console.scan(console_text), ["qemu-system-x86_64"])


def test_validate_summary_fields_are_its_json_keys_and_a_splat_fails_it(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    rep = ktap.parse(KTAP_OK)
    good = validate_run.summarize(_boot(tmp_path, "booted\n"), rep, _kernel(tmp_path), 10_000, 10_000, 60, seed=7,
                              kselftest=ktap.parse("KTAP version 1\n1..1\nok 1 a\n"), kunit=ktap.parse(KTAP_OK),
                              leak_text="", phase_rows=[{"phase": "validator", "seconds": 61.0}])
    doc = json.loads(dumps(good.as_dict()))
    assert list(doc) == [f.name for f in dataclasses.fields(validate_run.ValidateSummary)]
    assert good.ok and good.gate and good.failure is None and good.kmemleak_leaks == 0
    assert (good.malformed_writes, good.valid_writes, good.concurrent_ms) == (10_000, 10_000, 60_010)
    assert good.fuzz_expected_errnos == {"EINVAL": 9000, "ESRCH": 1000} and good.boot["qemu_argv"]
    # the nested rows are typed key by key too (docs/results.md: qemu.validate.kernel, qemu.validate.tests, qemu.run)
    assert list(doc["kernel"]) == [f.name for f in dataclasses.fields(validate_run.KernelRow)]
    for nested in (doc["tests"], doc["kselftest"], doc["kunit"]):
        assert list(nested) == [f.name for f in dataclasses.fields(ktap.KtapSummary)]
    assert list(doc["boot"]) == [f.name for f in dataclasses.fields(runner.BootResult)]

    bad = validate_run.summarize(_boot(tmp_path, SPLAT), rep, _kernel(tmp_path), 100, 100, 0, seed=7, leak_text="")
    assert not bad.ok and not bad.gate and bad.splats == 1 and "kasan" in bad.failure.lower()

    assert validate_run.exit_status(bad) == 1 and validate_run.exit_status(good) == 0
    render.validate(bad)
    out = capsys.readouterr().out
    assert "FAIL" in out and "splats (oops/BUG/KASAN/lockdep/WARN/leak): 1" in out and "failure:" in out
    assert "the edit loop, not the gate" in out


def _eb_boot(kid: str, rep: int, scale: float, held: int = exit_bench_run.EXPECTED_HELD) -> dict:
    states = {s: {"n": 20, "median_ns": int(1e6 * scale * (1 + i)), "p90_ns": int(2e6 * scale), "mean_ns": 1}
              for i, s in enumerate(exit_bench_run.STATES)}
    return {"rep": rep, "kernel": kid, "mm_intent": True, "status": 0, "ok": True, "failure": None, "seconds": 9.0,
            "guest_uptime": 8.0, "states": states, "intents_held": held, "processes_holding": 257}


def test_boot_result_fields_are_its_json_keys_and_decide_ok_once(tmp_path: Path) -> None:
    """`kvds qemu run --json`'s summary is BootResult.as_dict(): key for key its fields (docs/results.md documents
    the fields), strict JSON, and `ok`/`failure` agree with status, findings and timeout."""
    keys = [f.name for f in dataclasses.fields(runner.BootResult)]
    good = _boot(tmp_path, "[    1.0] booted\n")
    assert list(good.as_dict()) == keys and good.ok and good.failure is None
    assert json.loads(dumps(good.as_dict()))["qemu_argv"] == ["qemu-system-x86_64"]
    splat = _boot(tmp_path, SPLAT).as_dict()
    assert list(splat) == keys and not splat["ok"] and splat["failure"].startswith("kernel ")
    assert splat["findings"][0]["line_no"] == 1
    silent = _boot(tmp_path, "[    1.0] booted\n", status=None)
    assert not silent.ok and "never reported a status" in silent.failure


def test_exit_bench_summary_is_typed_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = _kernel(tmp_path, "aaaaaaaaaaaaaaaa"), _kernel(tmp_path, "bbbbbbbbbbbbbbbb", kasan=False)
    boots = [_eb_boot(k.id, r, s) for r in (1, 2, 3) for k, s in ((a, 1.0 + r / 10), (b, 2.0 + r / 10))]
    out = exit_bench_run.summarize([a, b], boots, 20)
    assert isinstance(out, exit_bench_run.ExitBenchSummary) and out.ok and out.failure is None
    doc = envelope("/results/x", out.as_dict())
    assert list(doc["summary"]) == [f.name for f in dataclasses.fields(exit_bench_run.ExitBenchSummary)]
    assert [(c["kernel"], c["state"]) for c in out.comparisons] == [(b.id, s) for s in exit_bench_run.STATES]
    assert all(c["difference"] == "higher" for c in out.comparisons)     # b's boots are all about twice a's
    assert render.STATES == exit_bench_run.STATES

    assert list(out.kernels[0]["vs_unused"]) == ["one", "many"]                  # fork + exit against fork + exit
    assert list(out.kernels[0]["vs_unmap_untagged"]) == ["unmap_tagged", "unmap_last"]   # munmap against munmap
    render.exit_bench(out)
    text = capsys.readouterr().out
    assert text.count(" boots)") == 2 and f"{b.id} / {a.id} (many)" in text and "failure" not in text
    assert "3 boot(s) per kernel" in text and text.count("vs unmap_untagged (per boot)") == 4
    assert f"{b.id} / {a.id} (unmap_last)" in text
    # the stored summary.json loads back into the same typed summary and prints the same table
    stored = exit_bench_run.ExitBenchSummary.from_json(json.loads(dumps(out.as_dict())))
    assert stored.as_dict() == json.loads(dumps(out.as_dict()))
    render.exit_bench(stored)
    assert capsys.readouterr().out == text

    # a run stored before the unmap states existed still prints its fork + exit rows
    old = json.loads(dumps(out.as_dict()))
    for k in old["kernels"]:
        k.pop("vs_unmap_untagged")
        for s in exit_bench_run.UNMAP_STATES:
            k["median_ms"].pop(s)
    render.exit_bench(exit_bench_run.ExitBenchSummary.from_json(old))
    assert "unmap_untagged:" not in capsys.readouterr().out

    broken = exit_bench_run.summarize([a], [{**_eb_boot(a.id, 1, 1.0), "ok": False, "failure": "held 3"}], 20)
    assert not broken.ok and broken.failure == f"{a.id} rep 1: held 3"
    assert exit_bench_run.exit_status(broken) == 1 and exit_bench_run.exit_status(out) == 0
    render.exit_bench(broken)
    assert f"failure: {a.id} rep 1: held 3" in capsys.readouterr().out
