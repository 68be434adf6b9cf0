"""The headline table at the top of a report: one row per key figure, one column per suite.

Built last, from what the track sections recorded in ctx.summary, and placed right after the introduction.
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
    s = ctx.summary
    labels = [x.label for x in ctx.suites]
    rows: list[list[str]] = []

    def add(name: str, get) -> None:
        vals = [get(label) for label in labels]
        if any(v not in (None, "-") for v in vals):
            rows.append([name, *[_f(v) for v in vals]])

    io = s.get("io", {})
    for variant in ("unloaded", "baseline", "separated"):
        add(f"critical-read p99, {variant} (us)", lambda l, v=variant: io.get(l, {}).get(v, {}).get("p99_us"))
    add("interference factor, baseline", lambda l: io.get(l, {}).get("baseline", {}).get("interference_factor"))
    add("interference factor, separated", lambda l: io.get(l, {}).get("separated", {}).get("interference_factor"))
    add("spill MB/s, baseline", lambda l: io.get(l, {}).get("baseline", {}).get("spill_mb_s"))
    add("spill MB/s, separated", lambda l: io.get(l, {}).get("separated", {}).get("spill_mb_s"))
    sweep = s.get("io_sweep", {})
    add("sweep goal met by (interference <= 1.5, spill >= 50%, whole 95% interval)",
        lambda l: (", ".join(sweep[l]) or "nothing") if l in sweep else None)
    vm = s.get("vm", {})
    for role in ("baseline", "intent"):
        add(f"decode-critical pages swapped out, {role}",
            lambda l, r=role: vm.get(l, {}).get("decode_critical_swapped_out", {}).get(r))
        add(f"decode-critical re-access p99, {role} (us)",
            lambda l, r=role: vm.get(l, {}).get("decode_critical_p99_us", {}).get(r))
    q = s.get("qemu", {})
    add("mm_intent validate", lambda l: q.get(l, {}).get("ok"))
    add("malformed writes / console splats",
        lambda l: f"{q[l].get('malformed_writes')} / {q[l].get('splats')}" if l in q else None)
    pol = s.get("policy", {})
    for p in ("ExpectedNextUse", "LRU"):
        add(f"simulated decode-critical miss / access, {p}", lambda l, p=p: pol.get(l, {}).get(p))
    rep = s.get("replay", {})
    for p in ("ExpectedNextUse", "LRU"):
        add(f"replayed decode-step p99 (us), {p}", lambda l, p=p: rep.get(l, {}).get(p, {}).get("real_p99_us"))
    return rows


def render_into(ctx: ReportContext, position: int) -> None:
    rows = _rows(ctx)
    if not rows:
        return
    part = Document(ctx.doc.base)
    part.heading("Summary")
    part.table(["figure", *[x.label for x in ctx.suites]], rows)
    for label, verdicts in ctx.summary.get("verdicts", {}).items():  # the same lines the sections print
        for what, line in verdicts.items():
            part.para(f"{what} ({label}): {line}.")
    ctx.doc.blocks[position:position] = part.blocks
    ctx.summary["headline"] = {r[0]: r[1:] for r in rows}
