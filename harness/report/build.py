"""Assemble a report: sections in a fixed order, written as report.md, report.html and report.json."""

from __future__ import annotations

from pathlib import Path

from harness import atomic, tracks
from harness.results import strict
from harness.report.context import ReportContext, Suite
from harness.report.document import Document
from harness.report.sections import environment, summary

# Track sections come from the `kvds.report_sections` entry points (harness/tracks.py), in the order of their names;
# each renders nothing when its runs are absent. A section named "00-..." leads: it renders before the environment
# and the Summary table, so its table is the report's first (the end-to-end factorial table).
LEAD_PREFIX = "00-"


def build_report(suites: list[Suite], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = Document(out_dir)
    ctx = ReportContext(suites, doc, out_dir / "figures")
    title = "kvds report: " + ", ".join(s.label for s in suites)
    doc.heading(title, 1)
    doc.para("Every figure below comes from raw samples stored with the runs; intervals are 95% confidence "
             "intervals over repetitions (cluster bootstrap, Student t) unless a section says otherwise. Fewer than "
             "3 repetitions give point estimates, marked as such; a percentile with fewer than 10 samples beyond "
             "it is not printed (\"n too small\"); \"-\" is missing data, with the reason beside it. A goal is "
             "met only when its whole interval says so, missed when the whole interval says the opposite, and "
             "inconclusive otherwise.")
    sections = tracks.report_sections()
    for section in (s for s in sections if s.name.startswith(LEAD_PREFIX)):
        section.load()(ctx)
    intro_end = len(doc.blocks)
    environment.render(ctx)
    environment.render_stages(ctx)
    for section in (s for s in sections if not s.name.startswith(LEAD_PREFIX)):
        section.load()(ctx)
    summary.render_into(ctx, intro_end)
    paths = {
        "markdown": atomic.write_text(out_dir / "report.md", doc.markdown()),
        "html": atomic.write_text(out_dir / "report.html", doc.html(title)),
        "json": atomic.write_json(out_dir / "report.json", strict({**ctx.summary, "verdicts": ctx.verdicts})),
    }
    return paths


def verdict_lines(report_json: Path) -> list[str]:
    """The goal verdicts a built report recorded ("<goal> (<suite>): <verdict with its interval>"), for the
    summary `kvds run` prints: the same lines as the report's, never a second judgement."""
    import json

    doc = json.loads(Path(report_json).read_text()) if Path(report_json).exists() else {}
    return [f"{what} ({label}): {line}" for label, v in (doc.get("verdicts") or {}).items() for what, line in v.items()]
