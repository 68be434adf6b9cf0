"""VM section: per-class re-access latency and pages swapped out, baseline vs intent mapping."""

from __future__ import annotations

import math

from harness.intent import IntentClass
from harness.report import figures, fmt
from harness.report.context import ReportContext, Suite
from harness.stats import verdict_from_dict

NAN = math.nan


def _faults(cd: dict) -> object:
    per = cd.get("major_faults", {}).get("per_rep")
    return sum(per) if per else "- (not recorded)"


def _suite(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("vm-bench")
    if run is None:
        return
    s = run.summary
    base = s.get("baseline")
    variants = sorted(s.get("variants", {}), key=lambda v: (v != base, v))  # the no-intent reference first
    swap = s.get("swap", {})
    ctx.doc.para(
        f"Suite {suite.label}: run {run.run_id}; swap {swap.get('kind')} ({swap.get('device')}), pressure "
        f"{s.get('pressure_pct')}% of the arena, {s.get('reps')} repetitions alternating, variants {', '.join(variants)}."
    )
    classes = [c.value for c in IntentClass]
    rows = []
    for c in classes:
        for v in variants:
            cd = s["variants"][v]["classes"].get(c)
            if not cd:
                continue
            rows.append([c, v, cd.get("pages"), fmt.estimate(cd.get("reaccess_us", {}).get("p50")),
                         fmt.estimate(cd.get("reaccess_us", {}).get("p99")), fmt.estimate(cd.get("swapped_out_pages", {}).get("mean")),
                         fmt.estimate(cd.get("dropped_pages", {}).get("mean")), fmt.estimate(cd.get("resident_pages", {}).get("mean")),
                         _faults(cd)])
    ctx.doc.table(["class", "variant", "pages", "re-access p50 (us)", "re-access p99 (us)", "swapped out (pages)",
                   "dropped (pages)", "resident (pages)", "major faults (all reps)"], rows)
    share = [[v, fmt.estimate(s["variants"][v].get("reclaim_share_cold", {}).get("mean")),
              fmt.estimate(s["variants"][v].get("squeeze_share_cold", {}).get("mean"))] for v in variants]
    ctx.doc.para(f"Share of reclaim taken from the cold classes ({', '.join(s.get('cold_classes', []))}):")
    ctx.doc.table(["variant", "share of swapped-out pages", "share of pages the limit took"], share)
    # a class without a p99 (no pages of it, or too few re-accesses beyond p99) gets no bar and says why, never a
    # zero-height bar
    def get(v: str, c: str, *path: str) -> float:
        x = fmt.value(s["variants"][v]["classes"].get(c), *path)
        return NAN if x is None else x

    p99 = {v: [get(v, c, "reaccess_us", "p99", "value") for c in classes] for v in variants}
    err = {v: ([get(v, c, "reaccess_us", "p99", "lo") for c in classes],
               [get(v, c, "reaccess_us", "p99", "hi") for c in classes]) for v in variants}
    path = figures.grouped_bars(classes, p99, ctx.fig(f"vm-p99-{run.run_id}.png"),
                                "Re-access latency per page, p99, by intent class", "p99 latency (us, log scale)",
                                errors=err, log=True)
    ctx.doc.figure(path, f"Per-class re-access p99 with 95% CIs ({suite.label}); 'n/a': no p99 for that class")
    swapped = {v: [100.0 * get(v, c, "swapped_out_pages", "mean", "value")
                   / s["variants"][v]["classes"][c]["pages"] if s["variants"][v]["classes"].get(c, {}).get("pages")
                   else NAN for c in classes] for v in variants}
    path = figures.grouped_bars(classes, swapped, ctx.fig(f"vm-swapped-{run.run_id}.png"),
                                "Pages swapped out after the squeeze, by intent class", "% of the class's pages")
    ctx.doc.figure(path, f"Per-class share of pages swapped out ({suite.label}); 'n/a': not measured")
    _comparison(ctx, s.get("comparison") or {})
    h = s.get("headline", {})
    for key in ("damon", "mglru", "mm_intent"):
        st = s.get(key) or {}
        if st:
            ctx.doc.para(f"{key.upper()}: {st.get('status')}" + (f" ({st.get('reason')})" if st.get("reason") else ""))
    ctx.summary.setdefault("vm", {})[suite.label] = {
        "decode_critical_swapped_out": {k: fmt.value(h, f"{k}_decode_critical_swapped_out", "mean", "value")
                                        for k in ("baseline", "intent")},
        "decode_critical_p99_us": {k: fmt.value(h, f"{k}_decode_critical_p99_us", "value") for k in ("baseline", "intent")},
    }
    fig = ctx.summary["vm"][suite.label]
    for role in ("baseline", "intent"):
        ctx.headline(f"decode-critical pages swapped out, {role}", suite.label,
                     fig["decode_critical_swapped_out"][role])
        ctx.headline(f"decode-critical re-access p99, {role} (us)", suite.label, fig["decode_critical_p99_us"][role])


def _comparison(ctx: ReportContext, comp: dict) -> None:
    """The guest-lab table (none / madvise-only / memcg-protect / mm-intent): decode-critical pages swapped out,
    their re-access p99, the cold classes' share of reclaim, and the verdicts against the reference mapping."""
    if not comp.get("variants"):
        return
    ref = comp.get("reference")
    rows = []
    for name, row in comp["variants"].items():
        v = row.get("verdicts", {})
        rows.append([name, row.get("reps"), fmt.estimate(row.get("decode_critical_swapped_out", {}).get("mean")),
                     fmt.estimate(row.get("decode_critical_p99_us")), fmt.estimate(row.get("reclaim_share_cold")),
                     verdict_from_dict(v.get("decode_critical_swapped_out_zero")),
                     "(reference)" if name == ref else verdict_from_dict(v.get("decode_critical_p99_no_worse_than_reference"))])
    for name, why in (comp.get("unavailable") or {}).items():
        rows.append([name, 0, f"unavailable: {why}", "-", "-", "-", "-"])
    ctx.doc.para("Decode-critical protection under the same resident budget and pressure"
                 + (f", judged by interval against {ref}:" if ref else ":"))
    ctx.doc.table(["variant", "reps", "decode-critical swapped out", "decode-critical re-access p99 (us)",
                   "cold share of reclaim", "verdict: swapped out = 0", "verdict: p99 no worse than reference"], rows)


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("vm-bench") for s in ctx.suites):
        return
    ctx.doc.heading("KV arena under memory pressure (VM track)")
    for suite in ctx.suites:
        _suite(ctx, suite)
