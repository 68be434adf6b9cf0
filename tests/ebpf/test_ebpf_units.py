"""Pure parts of the eBPF track (histogram arithmetic, taskstats decoding, CLI input errors)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from harness import doctor
from harness.errors import UserError

from ebpf import hist as H
from ebpf.recorder import fault_kind, parse_probes


def _bcc_slot(v: int) -> int:
    """bcc's bpf_log2l (and kvds.bpf.c's kvds_log2l, net_trace.bpf.c's log2_slot): floor(log2 v) + 1, 0 for 0."""
    return max(v.bit_length(), 1)


def test_every_value_lies_in_the_bounds_of_the_slot_the_kernel_puts_it_in() -> None:
    for v in (0, 1, 2, 3, 4, 7, 8, 100, 127, 128, 1000, 65535, 65536, 10**9, 2**40 + 5):
        lo, hi = H.bounds(_bcc_slot(v))
        assert lo <= v <= hi, (v, _bcc_slot(v), lo, hi)


def test_log2_buckets_match_bcc_slots() -> None:
    h = H.new_hist()
    for slot, n in ((0, 1), (3, 4), (5, 95)):
        H.add(h, slot, n)
    assert h["count"] == 100 and h["buckets"][:6] == [1, 0, 0, 4, 0, 95]
    assert H.bounds(1) == (0, 1) and H.bounds(2) == (2, 3) and H.bounds(3) == (4, 7)
    assert H.percentile_bounds(h, 5) == (4, 7) and H.percentile_bounds(h, 99) == (16, 31)
    text = H.format_log2(h, "t")
    assert "8 -> 15" in text and "count 100" in text
    assert H.merge([h, h])["count"] == 200


def test_plot_writes_png(tmp_path) -> None:
    h = H.new_hist()
    H.add(h, 6, 10)
    p = H.plot(h, "blk/test", tmp_path / "x.png")
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_probe_names_and_fault_kinds() -> None:
    assert parse_probes("blk, faults,blk") == ("blk", "faults")
    with pytest.raises(UserError):
        parse_probes("blk,kprobe")
    assert fault_kind(0x6) == "write-not-present" and fault_kind(0x7) == "write-protection"
    assert fault_kind(0x14) == "exec-not-present" and fault_kind(0x4) == "read-not-present"


@doctor.skip_unless("ebpf.taskstats")
def test_taskstats_reports_this_process() -> None:
    from ebpf.taskstats import TaskstatsClient

    with TaskstatsClient() as c:
        d = c.query(os.getpid())
    assert d is not None and d.pid == os.getpid() and d.counts["cpu"] > 0


@pytest.mark.parametrize("argv", [
    ["ebpf", "record", "--probe", "kprobes"],
    ["ebpf", "record", "--duration", "1", "--", "true"],
    ["ebpf", "record", "--duration", "-1"],
    ["ebpf", "record", "--device", "/etc/passwd", "--duration", "1"],
])
def test_bad_input_is_one_line_exit_2(argv: list[str], kvds_env: dict[str, str]) -> None:
    p = subprocess.run([sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True, timeout=60,
                       env=kvds_env)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_device_filter_is_constants_up_to_16_devices_then_the_map() -> None:
    """Few filtered devices are compared as constants in .rodata (no map lookup per block event); more than 16
    fall back to the blk_devs map (the recorder fills it either way)."""
    from ebpf.libbpf_loader import MAX_DEVS, kvds_cfg

    devs = ((7 << 20) | 5, (254 << 20) | 0)
    cfg = kvds_cfg(False, True, devs)
    assert (cfg.filter_devices, cfg.ndevs, tuple(cfg.devs[:3])) == (1, 2, (*devs, 0))
    many = tuple(range(1, MAX_DEVS + 2))
    assert kvds_cfg(False, True, many).ndevs == 0 and kvds_cfg(False, False, devs).ndevs == 0


@doctor.skip_unless("root", "ebpf.probe.blk")
def test_record_files_its_typed_summary_and_prints_the_one_shape(kvds_env: dict[str, str]) -> None:
    """`kvds ebpf record -- CMD`: summary.json holds exactly RecordSummary's fields (the command's status among
    them), --json the one envelope with the run it filed and that very summary, and a failing CMD makes the
    command fail."""
    import dataclasses
    import json
    from pathlib import Path

    from ebpf.summary import RecordSummary
    from tests.conftest import run_kvds

    r = run_kvds(["ebpf", "record", "--probe", "blk", "--no-plots", "--json", "--", "sh", "-c", "exit 3"], kvds_env)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == ["schema", "run", "summary"] and "blk" in doc["summary"]["probes"]
    summary = json.loads((Path(doc["run"]) / "summary.json").read_text())
    assert sorted(summary) == sorted(f.name for f in dataclasses.fields(RecordSummary))
    assert summary["command_status"] == 3 and summary["backend"] == "libbpf"
    assert doc["summary"] == summary  # --json prints the RecordSummary the run filed, not the raw results
    assert summary["results"]["probes"] == ["blk"] and "accounting" in summary["results"]["blk"]


def test_report_section_reads_the_typed_summaries(tmp_path) -> None:
    """The eBPF report section: a recording's timed/seen block requests come from RecordSummary (read back from
    its summary.json) into the table and the Summary's headline; the overhead goal is re-judged from its stored
    run, and its verdict line reaches report.json. A summary from before the accounting says so, not "0 of 0"."""
    import json

    from harness import stats
    from harness.report.build import build_report, verdict_lines
    from harness.report.context import load_suites
    from harness.results import ResultStore

    from ebpf.overhead import OverheadSummary, summary_verdict
    from ebpf.summary import RecordSummary

    store = ResultStore(tmp_path / "results")
    h = H.new_hist()
    H.add(h, 6, 1498)
    rec = store.new_run("ebpf-record", {})
    acct = {"loop5/rt/read": {"timed": 1498, "unfinished": 2, "untimed": 0, "overwritten": 0, "lost": 0}}
    summary = RecordSummary("libbpf", "block_rq_insert/issue/complete via tp_btf", 0.1, 0.0, 2.0, None,
                            {"blk/issue_to_complete/loop5/rt/read": 1498}, acct)
    rec.write_summary(summary.as_dict())
    rec.write_json("ebpf", {"blk": {"issue_to_complete": {"loop5": {"rt": {"read": h}}}, "insert_to_issue": {},
                                    "accounting": {}, "devices": {"loop5": "7:5"}}})
    assert RecordSummary.from_json(rec.summary) == summary and summary.requests() == (1498, 1500)
    old = store.new_run("ebpf-record", {})
    old.write_summary({k: v for k, v in summary.as_dict().items() if k != "blk_accounting"})
    old.write_json("ebpf", {})
    ovh = store.new_run("ebpf-overhead", {})
    ovh.write_summary({"backend": "libbpf", "ratio_geomean": {"value": 0.97, "lo": 0.96, "hi": 0.98, "conf": 0.95}})
    paths = build_report(load_suites([rec.run_id, old.run_id, ovh.run_id], store), tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "| 1498 of 1500 |" in md and "- (recorded before kvds accounted for requests)" in md
    v = summary_verdict(OverheadSummary.from_json(ovh.summary))
    assert v.status == stats.MET and str(v) in md
    doc = json.loads(paths["json"].read_text())
    assert any(row == ["1498 of 1500"] for row in doc["headline"].values())
    assert any(line.startswith("eBPF probes' overhead") and str(v) in line for line in verdict_lines(paths["json"]))


def test_overhead_and_load_time_summaries_are_typed() -> None:
    """`kvds ebpf overhead` and `load-time` print and store one typed summary each: strict JSON (NaN as null), the
    optional figures present only when measured, and a stored run read back field for field."""
    from ebpf.summary import LoadTimeSummary, OverheadSummary

    nan = float("nan")
    o = OverheadSummary(["blk"], "libbpf", [0.5, 0.4, 0.3], "/dev/loop5", "mq-deadline", 2, 0.2, 4096,
                        ["0:without", "0:with", "1:with", "1:without"], [900.0, 910.0], [880.0, 905.0], 905.0,
                        892.5, 0.986, [nan, nan], 1.4, {"value": 0.986, "lo": None, "hi": None},
                        {"status": "inconclusive"},
                        "inconclusive", [0.1, 0.1], [[180, 180], [181, 181]], [0, 0], [0, 0])
    d = o.as_dict()
    assert d["ratio_ci95"] == [None, None] and "program_stats" not in d and "program_ns_per_read" not in d
    json.dumps(d, allow_nan=False)
    assert OverheadSummary.from_json(d).iops_with == [880.0, 905.0]
    assert set(OverheadSummary.from_json({}).as_dict()) < set(f.name for f in dataclasses.fields(OverheadSummary))
    t = LoadTimeSummary(1, ["blk"], [], [0.1, 0.1, 0.1], [0.2, 0.1, 0.1], 2,
                        {"blk": {"runs_s": [0.05], "median_s": 0.05, "min_s": 0.05, "max_s": 0.05}},
                        ["0:blk"], 0.0)
    assert t.as_dict()["compile_s"] == 0.0  # measured (cached): kept
    assert LoadTimeSummary.from_json(t.as_dict()) == t
