"""The VM track's report section (`kvds.report_sections` entry point): per-class re-access latency and pages swapped
out per variant, the comparison against the reference mapping, read from the typed summary (BenchSummary)."""

from __future__ import annotations

import math

from harness.intent import IntentClass
from harness.report import fmt, plots
from harness.report.context import ReportContext, Suite
from harness.stats import verdict_from_dict
from kernel_vm.render import clock_words
from kernel_vm.summary import SCHEMA, ClassFigures, Comparison, BenchSummary

NAN = math.nan
CLASSES = [c.value for c in IntentClass]


def _faults(c: ClassFigures) -> object:
    per = (c.major_faults or {}).get("per_rep")
    return sum(per) if per else "- (not recorded)"


def _num(x: float | None) -> float:
    return NAN if x is None else x


def _suite(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("vm-bench")
    if run is None:
        return
    s = BenchSummary.from_json(run.summary)
    variants = sorted(s.variants, key=lambda v: (v != s.baseline, v))  # the no-intent reference first
    ctx.doc.para(
        f"Suite {suite.label}: run {run.run_id}; swap {s.swap.get('kind')} ({s.swap.get('device')}), pressure "
        f"{s.pressure_pct}% of the arena, {s.reps} repetitions alternating, variants {', '.join(variants)}; "
        f"latencies in clock {clock_words(s.clock)}.")
    rows = []
    for c in CLASSES:
        for v in variants:
            cd = s.variants[v].classes.get(c)
            if cd:
                rows.append([c, v, cd.pages, fmt.estimate(cd.reaccess_us.get("p50")),
                             fmt.estimate(cd.reaccess_us.get("p99")), fmt.estimate(cd.swapped_out_pages.get("mean")),
                             fmt.estimate(cd.dropped_pages.get("mean")), fmt.estimate(cd.resident_pages.get("mean")),
                             _faults(cd)])
    ctx.doc.table(["class", "variant", "pages", "re-access p50 (us)", "re-access p99 (us)", "swapped out (pages)",
                   "dropped (pages)", "resident (pages)", "major faults (all reps)"], rows)
    share = [[v, fmt.estimate((s.variants[v].reclaim_share_cold or {}).get("mean")),
              fmt.estimate((s.variants[v].squeeze_share_cold or {}).get("mean"))] for v in variants]
    ctx.doc.para(f"Share of reclaim taken from the cold classes ({', '.join(s.cold_classes)}):")
    ctx.doc.table(["variant", "share of swapped-out pages", "share of pages the limit took"], share)

    # a class without a p99 (no pages of it, or too few re-accesses beyond p99) gets no bar and says why, never a
    # zero-height bar
    def p99(v: str, c: str, key: str) -> float:
        cd = s.variants[v].classes.get(c)
        return _num(fmt.value(cd.reaccess_us, "p99", key) if cd else None)

    def swapped_pct(v: str, c: str) -> float:
        cd = s.variants[v].classes.get(c)
        return 100.0 * _num(fmt.value(cd.swapped_out_pages, "mean", "value")) / cd.pages if cd and cd.pages else NAN

    path = plots.grouped_bars(CLASSES, {v: [p99(v, c, "value") for c in CLASSES] for v in variants},
                                ctx.fig(f"vm-p99-{run.run_id}.png"),
                                "Re-access latency per page, p99, by intent class", "p99 latency (us, log scale)",
                                errors={v: ([p99(v, c, "lo") for c in CLASSES], [p99(v, c, "hi") for c in CLASSES])
                                        for v in variants}, log=True)
    ctx.doc.figure(path, f"Per-class re-access p99 with 95% CIs ({suite.label}); 'n/a': no p99 for that class")
    path = plots.grouped_bars(CLASSES, {v: [swapped_pct(v, c) for c in CLASSES] for v in variants},
                                ctx.fig(f"vm-swapped-{run.run_id}.png"),
                                "Pages swapped out after the squeeze, by intent class", "% of the class's pages")
    ctx.doc.figure(path, f"Per-class share of pages swapped out ({suite.label}); 'n/a': not measured")
    _comparison(ctx, suite, s.comparison, run.run_id, s.schema)
    for key in ("damon", "mglru", "mm_intent"):
        st = getattr(s, key)
        if st:
            ctx.doc.para(f"{key.upper()}: {st.get('status')}" + (f" ({st.get('reason')})" if st.get("reason") else ""))
    h = s.headline
    swapped = {"baseline": fmt.value(h.baseline_decode_critical_swapped_out, "mean", "value"),
               "intent": fmt.value(h.intent_decode_critical_swapped_out, "mean", "value")}
    fig = {"decode_critical_swapped_out": swapped,
           "decode_critical_p99_us": {"baseline": fmt.value(h.baseline_decode_critical_p99_us, "value"),
                                      "intent": fmt.value(h.intent_decode_critical_p99_us, "value")}}
    ctx.summary.setdefault("vm", {})[suite.label] = fig
    for role in ("baseline", "intent"):
        ctx.headline(f"decode-critical pages swapped out, {role}", suite.label, swapped[role])
        ctx.headline(f"decode-critical re-access p99, {role} (us)", suite.label, fig["decode_critical_p99_us"][role])


def _comparison(ctx: ReportContext, suite: Suite, comp: Comparison, run_id: str, schema: str | None) -> None:
    """The guest-lab table (none / madvise-only / memcg-protect / mm-intent): decode-critical pages swapped out,
    their re-access p99, the cold classes' share of reclaim, and the verdicts against the reference mapping."""
    if not comp.variants:
        return
    ref = comp.reference
    rows = []
    for name, row in comp.variants.items():
        v = row.verdicts
        p99 = "(reference)" if name == ref else verdict_from_dict(v.get("decode_critical_p99_no_worse_than_reference"))
        rows.append([name, row.reps, fmt.estimate(row.decode_critical_swapped_out.get("mean")),
                     fmt.estimate(row.decode_critical_p99_us), fmt.estimate(row.reclaim_share_cold),
                     verdict_from_dict(v.get("decode_critical_swapped_out_zero")), p99])
        if ref and name != ref and v.get("decode_critical_p99_no_worse_than_reference"):
            ctx.verdict(suite.label, f"vm: {name} decode-critical re-access p99 no worse than {ref}'s", p99)
    for name, why in comp.unavailable.items():
        rows.append([name, 0, f"unavailable: {why}", "-", "-", "-", "-"])
    ctx.doc.para("Decode-critical protection under the same resident budget and pressure"
                 + (f", judged by interval against {ref}:" if ref else ":"))
    ctx.doc.table(["variant", "reps", "decode-critical swapped out", "decode-critical re-access p99 (us)",
                   "cold share of reclaim", "verdict: swapped out = 0", "verdict: p99 no worse than reference"], rows)
    if ref and schema != SCHEMA:
        ctx.doc.para(f"Run {run_id} predates {SCHEMA} (it is {schema or 'unversioned'}): its p99 verdicts compare "
                     "unpaired repetitions against a goal of <= 1. `kvds vm compare " + run_id + "` judges its stored "
                     "samples again, repetitions paired, within the margin of 1.25.")


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("vm-bench") for s in ctx.suites):
        return
    ctx.doc.heading("KV arena under memory pressure (VM track)")
    for suite in ctx.suites:
        _suite(ctx, suite)
