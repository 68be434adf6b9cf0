"""The main job end to end: `kvds run --quick` on this machine.

Each stage's status is the one `kvds doctor` predicts (ok when its capabilities are available, skipped with the
doctor's own reason when not; a stage that could run and did not is a failure), the exit status is 0 only when
no stage failed, and each report section carries its figures by name (read from report.json and the runs the
stages filed), not a count of numbers that run ids and dates would satisfy.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from harness import doctor
from harness.commands.run_run import stages
from harness.results import ResultStore
from harness.suite import Stage, run_stage
from tests.conftest import needs_root, run_kvds

# The report heading each stage's figures appear under.
SECTION = {
    "e2e": "End to end: a real trace through the whole stack, policy x mechanism",
    "io": "Decode-critical reads under spill pressure",
    "io-model": "Decode-critical reads under spill pressure",
    "vm": "KV arena under memory pressure",
    "qemu": "mm_intent kernel interface",
    "policy": "Policies: simulated and replayed on a real kernel",
    "policy-sweep": "Policies: simulated and replayed on a real kernel",
}
EBPF_SECTION = "Kernel-side view"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _positive(d: dict, *path: str) -> float:
    """The figure at d[path...]: must be a finite number above zero (its name is in the failure message)."""
    v: Any = d
    for k in path:
        assert isinstance(v, dict) and k in v, f"figure {'.'.join(path)} missing (at {k!r})"
        v = v[k]
    assert _finite(v) and v > 0, f"figure {'.'.join(path)} = {v!r}"
    return float(v)


def _fraction(d: dict, *path: str) -> float:
    v: Any = d
    for k in path:
        assert isinstance(v, dict) and k in v, f"figure {'.'.join(path)} missing (at {k!r})"
        v = v[k]
    assert _finite(v) and 0 <= v <= 1, f"figure {'.'.join(path)} = {v!r}"
    return float(v)


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    nxt = md.find("\n## ", start + 1)
    return md[start: nxt if nxt != -1 else len(md)]


def _summary(results: Path, run_id: str) -> dict:
    return json.loads((results / run_id / "summary.json").read_text())


def _check_io(rj: dict, label: str, results: Path, st: dict) -> None:
    io = rj["io"][label]
    for mode in ("unloaded", "baseline", "separated"):
        _positive(io, mode, "p99_us")
    for mode in ("baseline", "separated"):
        _positive(io, mode, "interference_factor")
        _positive(io, mode, "spill_mb_s")
    (run,) = st["runs"]
    # eBPF: the kernel saw the bench's reads and writes at the block layer, per priority class, in every mode
    for mode in ("unloaded", "baseline", "separated"):
        reps = sorted((results / run).glob(f"ebpf-{mode}-rep*.json"))
        assert reps, f"no eBPF recording for mode {mode}"
        for rep in reps:
            per_dev = json.loads(rep.read_text())["blk"]["issue_to_complete"]
            reads = sum(h.get("count", 0) for classes in per_dev.values() for ops in classes.values()
                        for op, h in ops.items() if op == "read")
            assert reads > 0, f"{rep.name}: no block-layer reads recorded"


def _check_io_sweep(rj: dict, label: str, results: Path, st: dict) -> None:
    (run,) = st["runs"]
    points = _summary(results, run)["points"]
    assert points and {p["variant"] for p in points} >= {"baseline"}
    for p in points:
        name = f"{p['scheduler']}/{p['variant']}"
        _positive(p, "p50_us", "value")
        p99 = p["p99_us"]  # a quick sweep may have too few reads for a p99: then missing, with the reason
        present = _finite(p99["value"]) and p99["value"] > 0
        assert present or (p99["value"] is None and "n too small" in p99["reason"]), (name, p99)
        assert isinstance(p["meets_goal"], bool), name
    assert isinstance(rj["io_sweep"][label], list)  # the goal's met_by, possibly empty


def _check_vm(rj: dict, label: str, results: Path, st: dict) -> None:
    vm = rj["vm"][label]
    for v in ("baseline", "intent"):
        _positive(vm, "decode_critical_p99_us", v)
        swapped = vm["decode_critical_swapped_out"][v]
        assert _finite(swapped) and swapped >= 0, f"figure decode_critical_swapped_out.{v} = {swapped!r}"


def _check_qemu(rj: dict, label: str, results: Path, st: dict) -> None:
    q = rj["qemu"][label]
    assert q["ok"] is True, q
    assert _finite(q["planned"]) and q["planned"] > 0 and q["passed"] == q["planned"], q
    assert q["splats"] == 0 and _finite(q["malformed_writes"]) and q["malformed_writes"] > 0, q
    assert q["gate"] is False, q  # the quick job validates on the edit-loop profile, and says so
    # every check of the gate runs on the quick profile too (the gate's sizes: make test-slow,
    # tests/qemu/test_qemu_guest.py test_validate_passes_on_the_series)
    (run,) = st["runs"]
    s = _summary(results, run)
    assert s["ok"] and s["kernel"]["kasan_lockdep"] and s["errno_mismatches"] == 0, s.get("failure")
    assert s["malformed_writes"] >= 1_000 and s["valid_writes"] >= 1_000 and s["valid_via_pidfd"] > 0, s
    assert s["concurrent_ms"] >= 5_000 and s["concurrent_processes"] > 0 and s["kernel_table_rows"] >= 40, s
    assert s["splats"] == 0 and s["tests"]["passed"] == s["tests"]["planned"] == 13, s["tests"]
    ks, ku = s["kselftest"], s["kunit"]
    assert ks["failed"] == 0 and ks["passed"] == ks["planned"] >= 15, ks
    assert ku["failed"] == 0 and ku["complete"] and ku["passed"] == ku["planned"] == 1, ku
    assert s["kunit_cases"]["failed"] == 0 and s["kunit_cases"]["passed"] >= 50 and s["kmemleak_leaks"] == 0, s
    assert (results / run / "console.log").exists() and (results / run / "guest" / "ktap.txt").exists()


def _check_policy(rj: dict, label: str, results: Path, st: dict) -> None:
    pol = rj["policy"][label]
    for p in ("LRU", "DeadlineAware"):
        _fraction(pol, p)


def _check_policy_sweep(rj: dict, label: str, results: Path, st: dict) -> None:
    """The sweep on the shipped trace slice: every fraction has LRU and MIN, MIN never above LRU."""
    sweep = rj["policy_sweep"][label]
    assert set(sweep) == {"0.05", "0.1", "0.25"}, sweep
    for by_policy in sweep.values():
        lru, opt = by_policy["LRU"], by_policy["MIN"]
        assert _finite(lru) and _finite(opt) and 0 <= opt <= lru <= 1, by_policy


def _check_replay(rj: dict, label: str, results: Path, st: dict) -> None:
    rep = rj["replay"][label]
    for p in ("LRU", "DeadlineAware"):
        _positive(rep, p, "real_p99_us")
        _fraction(rep, p, "dc_miss_ratio")


def _check_io_model(rj: dict, label: str, results: Path, st: dict) -> None:
    """The guest lab's model device: a bench on a null_blk device, its figures in the report beside this host's."""
    # the stage files the invocation record (kind remote) and the guest's bench it fetched, both as its own
    (record,) = [r for r in st["runs"] if "-remote-" in r]
    (run,) = [r for r in st["runs"] if r.endswith("--guest")]
    assert _summary(results, record)["hosts"]["guest"]["status"] == "ok"
    s = _summary(results, run)
    assert s["config"]["device"]["kind"] == "model" and s["config"]["device"]["backing"] == "sata-ssd"
    io = rj["io_model"][label]
    for mode in ("unloaded", "baseline", "separated"):
        _positive(io, mode, "p99_us")
        assert io[mode]["device"].startswith("model device sata-ssd")
    assert s["goal"]["verdicts"]["separated"]["load"]["verdict"]  # judged with the guest's load, worded


def _check_e2e(rj: dict, label: str, results: Path, st: dict) -> None:
    """The four cells, each with a TPOT p99 and a high-priority SLO attainment."""
    cells = rj["e2e"][label]
    assert len(cells) == 4, cells
    for name in cells:
        _positive(cells, name, "tpot_p99_us")
        _fraction(cells, name, "slo_high")


CHECKS = {"e2e": _check_e2e, "io": _check_io, "io-sweep": _check_io_sweep, "io-model": _check_io_model,
          "vm": _check_vm, "qemu": _check_qemu, "policy": _check_policy, "policy-sweep": _check_policy_sweep,
          "replay": _check_replay}


def test_every_stage_with_figures_has_a_check() -> None:
    """A stage added to `kvds run` without a figure check here would pass unexamined."""
    unchecked = {s.name for s in stages(Path("."))} - set(CHECKS)
    assert unchecked == {"doctor", "replay-trace"}  # these file no result of their own


@needs_root
def test_a_stage_that_did_not_run_is_failed_unless_the_doctor_says_why(kvds_env, monkeypatch, tmp_path) -> None:
    """The rules of harness/suite.py on real kvds commands: `kvds io bench` refuses (exit 3) because io.ioload is
    hidden, which a stage that does not declare io.ioload cannot have foreseen: failed, not skipped. Declared, the
    same absence is a skip with the doctor's reason; with CI=true (io.ioload is on the host kind's list) a
    failure. A command that exits 0 without filing the result it should have is failed too."""
    monkeypatch.setenv(doctor.HIDE_ENV, "io.ioload")
    monkeypatch.delenv("CI", raising=False)
    store = ResultStore(tmp_path / "results")
    suite = store.new_run("suite", {})
    argv = ("io", "bench", "--duration", "1", "--reps", "1", "--json")
    out = run_stage(Stage("io", "t", argv, argv, needs=("root", "loop")), True, suite, store)
    assert out.status == "failed", out
    assert out.reason.startswith("exit 3 (unavailable) although kvds doctor reports the capabilities this stage "
                                 "needs (root, loop) available") and "io.ioload" in out.reason, out.reason
    declared = Stage("io", "t", argv, argv, needs=("root", "loop", "io.ioload"))
    out = run_stage(declared, True, suite, store)
    assert (out.status, out.reason) == ("skipped", doctor.gate("io.ioload")[1]) and out.seconds == 0
    monkeypatch.setenv("CI", "true")
    out = run_stage(declared, True, suite, store)
    assert out.status == "failed" and "CI=true" in out.reason and "io.ioload" in out.reason, out
    monkeypatch.delenv("CI")
    out = run_stage(Stage("doctor", "t", ("doctor", "--json"), ("doctor", "--json")), True, suite, store)
    assert out.status == "failed" and out.reason.startswith("exit 0 but filed no result"), out


@needs_root
@pytest.mark.timeout(1800)
def test_kvds_run_quick_stages_match_the_doctor_and_report_their_figures(kvds_env, guest_lab) -> None:
    plan = stages(Path("."))
    expect: dict[str, tuple[str, str]] = {}
    for st in plan:
        action, why = doctor.gate(*st.needs)
        assert action != "fail", f"stage {st.name}: {why}"  # a kvds error, or CI=true and the host must have it
        expect[st.name] = ("ok", "") if action == "run" else ("skipped", why)

    res = run_kvds(["run", "--quick", "--json"], kvds_env, timeout=1800)
    doc = json.loads(res.stdout)["summary"]
    got = {s["name"]: s for s in doc["stages"]}
    assert list(got) == [s.name for s in plan]
    for name, (status, reason) in expect.items():
        assert got[name]["status"] == status, (name, got[name]["reason"])
        # the same capability and status as the doctor's ("kvds doctor: loop unavailable: ..."); the free text
        # of a probe's reason may differ between two probes (a build cached in between)
        assert got[name]["reason"].split(":")[:2] == reason.split(":")[:2], (name, got[name]["reason"], reason)
    assert res.returncode == 0, res.stderr[-3000:]

    results = Path(kvds_env["KVDS_RESULTS_DIR"])
    md = Path(doc["report"]["markdown"]).read_text()
    rj = json.loads(Path(doc["report"]["json"]).read_text())
    (label,) = rj["stages"]
    assert rj["stages"][label] == {n: s["status"] for n, s in got.items()}
    assert rj["environment"][0]["kernel"] == os.uname().release
    for name, (status, why) in expect.items():
        if status == "skipped":
            assert got[name]["reason"] in md, f"the report does not say why {name} was skipped"
            continue
        if name in CHECKS:
            CHECKS[name](rj, label, results, got[name])
        if name in SECTION:
            assert f"## {SECTION[name]}" in md, f"report lacks the {SECTION[name]!r} section"
    if expect["e2e"][0] == "ok":  # the report leads with the factorial table
        first_table = next(line for line in md.splitlines() if line.startswith("|"))
        assert first_table.startswith("| cell | TPOT p50 (ms) |"), first_table
    if expect["io"][0] == "ok":
        ebpf = _section(md, EBPF_SECTION)
        assert "figures/ebpf-blk-" in ebpf, "eBPF section without its block-layer histograms"
    for fig in (line.split("](", 1)[1].rstrip(")") for line in md.splitlines() if "](figures/" in line):
        p = Path(doc["report"]["markdown"]).parent / fig
        assert p.stat().st_size > 5000 and p.read_bytes().startswith(b"\x89PNG"), fig
    html = Path(doc["report"]["html"]).read_text()
    assert html.count("data:image/png;base64,") == md.count("](figures/")


def test_a_stage_failure_is_read_from_the_json_a_command_printed() -> None:
    """A command that fails without a word on stderr says why in its --json: at the top level (the tracks' printers
    today) or in the summary of the one shape (harness/emit.py)."""
    from harness.suite import _json_failure

    assert _json_failure('{"failure": "validator crashed"}') == "validator crashed"
    assert _json_failure('{"schema": 1, "run": null, "summary": {"failure": "kernel splat"}}') == "kernel splat"
    assert _json_failure('{"schema": 1, "run": null, "summary": {"ok": true}}') == ""
