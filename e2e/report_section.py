"""The report's first section (registered as `kvds.report_sections` 00-e2e, which the report renders before
everything else): per suite, the newest e2e run's factorial table, its effects and the goals' verdicts, read through
the typed summary (E2eSummary) so a renamed key fails here rather than reading as missing. The track sections
after it explain the table mechanism by mechanism."""
from __future__ import annotations

from harness.report.context import ReportContext
from e2e import table
from e2e.summary import E2eSummary


def render(ctx: ReportContext) -> None:
    runs = ctx.latest("e2e")
    if not runs:
        return
    ctx.doc.heading("End to end: a real trace through the whole stack, policy x mechanism")
    for suite, run in runs:
        s = E2eSummary.from_json(run.summary)
        t = s.trace
        reps = max((c.get("reps", 0) for c in s.cells.values()), default=0)
        ctx.doc.para(f"Suite {suite.label}, run {run.run_id}: {t.get('steps')} decode steps of {t.get('path')} "
                     f"(blocks scaled to {t.get('block_bytes')} B), {reps} repetition(s) per cell in alternating "
                     f"order; other tenants: {s.tenants.get('stated')}. TPOT is the replayed KV stall plus the "
                     "modelled compute and recompute; the simulator's prediction for the cell's policy stands beside "
                     "it, and its prediction rerun on the op costs the cell measured (calibrated). mm_intent: "
                     f"{s.setup.get('mm_intent', 'not recorded')}; load average at the start "
                     f"{', '.join(f'{x:.2f}' for x in s.load.get('start', {}).get('loadavg', []))}.")
        ctx.doc.table(table.HEADERS, table.factorial_rows(s.cells, s.order))
        ctx.doc.table(["cell", "where the time went, measured per decode step (ms)"],
                      [[name, table.tail_text(c)] for name, c in table.in_design_order(s.cells, s.order)])
        ctx.doc.table(table.EFFECT_HEADERS, table.effect_rows(s.effects))
        for name, g in s.goals.items():
            ctx.doc.para(f"Goal {name}: {g['line']}")
            ctx.verdict(suite.label, f"e2e {name}", g["line"])
        ctx.summary.setdefault("e2e", {})[suite.label] = {
            name: {"tpot_p99_us": (c.get("tpot_p99_us") or {}).get("value"),
                   "slo_high": (c.get("slo_high") or {}).get("value")} for name, c in s.cells.items()}
        top = table.in_design_order(s.cells, s.order)[-1][1]
        ratio = (s.goals.get("tpot_p99_ratio") or {}).get("value")
        ctx.headline("e2e TPOT p99 ratio, whole stack vs reference", suite.label, ratio)
        ctx.headline("e2e high-priority SLO, whole stack", suite.label, (top.get("slo_high") or {}).get("value"))
