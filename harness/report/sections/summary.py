"""The headline table at the top of a report: one row per key figure, one column per suite.

Built last, from the figures the track sections handed over with ReportContext.headline (the core knows no
track's keys), and placed right after the introduction.
"""

from __future__ import annotations

import math

from harness.report.context import ReportContext
from harness.report.document import Document


def _f(v: object, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "PASS" if v else "FAIL"
    if isinstance(v, (int, float)):
        return f"{v:.4g}{unit}" if math.isfinite(v) else "-"
    return str(v)


def _rows(ctx: ReportContext) -> list[list[str]]:
    labels = [x.label for x in ctx.suites]
    rows = []
    for figure, by_suite in ctx.headlines.items():
        vals = [_f(by_suite.get(label)) for label in labels]
        if any(v != "-" for v in vals):
            rows.append([figure, *vals])
    return rows


def render_into(ctx: ReportContext, position: int) -> None:
    rows = _rows(ctx)
    if not rows and not ctx.verdicts:
        return
    part = Document(ctx.doc.base)
    part.heading("Summary")
    if rows:
        part.table(["figure", *[x.label for x in ctx.suites]], rows)
    for label, verdicts in ctx.verdicts.items():  # the same lines the sections print
        for what, line in verdicts.items():
            part.para(f"{what} ({label}): {line}.")
    ctx.doc.blocks[position:position] = part.blocks
    ctx.summary["headline"] = {r[0]: r[1:] for r in rows}
