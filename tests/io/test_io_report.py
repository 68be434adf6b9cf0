"""The report's I/O section (io_priority/report_section.py) reads runs through their typed summaries and hands the
fio-check goal to the Summary through ReportContext: headline figures and the verdict line, with the rule its
ratios were resampled by. A constructed run: the rule under test is the section, not a device."""

from __future__ import annotations

from harness.report.context import ReportContext, Suite
from harness.report.document import Document
from harness.results import ResultStore
from io_priority import pairing, report_section
from io_priority.summary import FIO_CHECK_SCHEMA, FioCheckSummary


def _ratio(v: float, lo: float, hi: float) -> dict:
    return {"value": v, "lo": lo, "hi": hi, "conf": 0.95,
            "pairing": {"rule": pairing.PAIRED, "pairs": 60, "reps": [60, 60], "max_between": 0}}


def test_fio_check_goal_reaches_the_summary_with_its_rule(tmp_path) -> None:
    store = ResultStore(tmp_path / "results")
    run = store.new_run("io-fio-check", {})
    s = FioCheckSummary(FIO_CHECK_SCHEMA, {"engine": "psync"}, [[0, "kvds"], [0, "fio"]],
                        {"kvds": {"reads": 36000}, "fio": {"reads": 36005}}, [], _ratio(0.99, 0.95, 1.03),
                        _ratio(1.2, 1.12, 1.3), 1.1, "open-loop 200/s, wait sleep", "sleep", "submit -> complete",
                        "fio ...", {}, "", False, {})
    run.write_summary(s.as_dict())
    ctx = ReportContext([Suite("a", None, runs=[store.get(run.run_id)])], Document(tmp_path), tmp_path / "fig")
    report_section.render(ctx)
    assert ctx.headlines["fio-check p50 kvds/fio"] == {"a": 0.99}
    assert ctx.headlines["fio-check p99 kvds/fio"] == {"a": 1.2}
    # open loop: p50 inside the band, p99 wholly above it -> missed, judged again from the stored ratios
    line = ctx.verdicts["a"][report_section.FIO_GOAL]
    assert line.startswith("missed") and "1.2 [1.12, 1.3]" in line, line
    md = ctx.doc.markdown()
    assert pairing.PAIRED in md and "36000 / 36005" in md
