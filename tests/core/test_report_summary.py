"""The Summary table is built from what the track sections hand the core (ReportContext.headline / .verdict):
one row per figure in the order first given, one column per suite, missing data as '-', rows with no data at
all left out, and the verdict lines repeated below it and stored for `kvds run` to print."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.report.build import verdict_lines
from harness.report.context import ReportContext, Suite
from harness.report.document import Document
from harness.report.sections import summary


def _ctx(tmp_path: Path) -> ReportContext:
    doc = Document(tmp_path)
    doc.heading("title", 1)
    return ReportContext([Suite("host-a", None), Suite("host-b", None)], doc, tmp_path / "figures")


def test_summary_rows_come_from_the_sections_headlines(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.headline("critical-read p99, baseline (us)", "host-a", 812.345)
    ctx.headline("critical-read p99, baseline (us)", "host-b", math.nan)  # missing data: '-'
    ctx.headline("never measured", "host-a", None)  # no suite has it: no row
    ctx.headline("mm_intent validate", "host-b", True)
    ctx.verdict("host-a", "io sweep", "met: 0.61 [0.53, 0.71]")
    summary.render_into(ctx, 1)
    md = ctx.doc.markdown()
    assert md.index("# title") < md.index("## Summary")
    assert "| critical-read p99, baseline (us) | 812.3 | - |" in md
    assert "| mm_intent validate | - | PASS |" in md
    assert "never measured" not in md
    assert md.index("critical-read p99") < md.index("mm_intent validate")  # the order the sections gave
    assert "io sweep (host-a): met: 0.61 [0.53, 0.71]." in md
    assert ctx.summary["headline"]["mm_intent validate"] == ["-", "PASS"]


class _Section:
    """A stand-in for a track's registered section (an entry point's name orders it; load() gives its render
    function)."""

    name = "io"

    name = "10-stand-in"  # an entry point's name: its place in the report ("00-..." would lead)

    @staticmethod
    def load():
        def render(ctx: ReportContext) -> None:
            ctx.headline("spill MB/s, baseline", "host-b", 41.0)
            ctx.verdict("host-b", "fio-check", "inconclusive: 0.98 [0.90, 1.08]")
        return render


def test_verdicts_reach_report_json_and_kvds_run(tmp_path: Path, monkeypatch) -> None:
    from harness import tracks
    from harness.report.build import build_report

    monkeypatch.setattr(tracks, "report_sections", lambda: [_Section])
    paths = build_report([Suite("host-a", None), Suite("host-b", None)], tmp_path / "out")
    doc = json.loads(paths["json"].read_text())
    assert doc["verdicts"] == {"host-b": {"fio-check": "inconclusive: 0.98 [0.90, 1.08]"}}
    assert doc["headline"] == {"spill MB/s, baseline": ["-", "41"]}
    assert verdict_lines(paths["json"]) == ["fio-check (host-b): inconclusive: 0.98 [0.90, 1.08]"]
    assert "fio-check (host-b): inconclusive" in paths["markdown"].read_text()


def test_verdicts_alone_still_make_a_summary(tmp_path: Path) -> None:
    """A report of goals runs only (verdicts, no headline figure) still leads with them."""
    ctx = _ctx(tmp_path)
    ctx.verdict("host-a", "knob: high-priority misses <= 0.005", "inconclusive: 0.0079 [0.0047, 0.0112]")
    summary.render_into(ctx, 1)
    md = ctx.doc.markdown()
    assert "## Summary" in md and "| figure |" not in md
    assert "knob: high-priority misses <= 0.005 (host-a): inconclusive: 0.0079 [0.0047, 0.0112]." in md
