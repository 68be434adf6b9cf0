"""VM section: per-class re-access latency and pages swapped out, baseline vs intent mapping."""

from __future__ import annotations

from harness.intent import IntentClass
from harness.report import figures
from harness.report.context import ReportContext, Suite


def _v(d: dict | None, *path: str) -> float | None:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d if isinstance(d, (int, float)) else None


def _est(d: dict | None) -> str:
    if not isinstance(d, dict) or d.get("value") is None:
        return "-"
    lo, hi = d.get("lo"), d.get("hi")
    if lo is None or hi is None:
        return f"{d['value']:.4g}"
    return f"{d['value']:.4g} [{lo:.3g}, {hi:.3g}]"


def _suite(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("vm-bench")
    if run is None:
        return
    s = run.summary
    variants = list(s.get("variants", {}))
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
            rows.append([c, v, cd.get("pages"), _est(cd.get("reaccess_us", {}).get("p50")),
                         _est(cd.get("reaccess_us", {}).get("p99")), _est(cd.get("swapped_out_pages", {}).get("mean")),
                         _est(cd.get("dropped_pages", {}).get("mean")), _est(cd.get("resident_pages", {}).get("mean")),
                         sum(cd.get("major_faults", {}).get("per_rep", []) or [0])])
    ctx.doc.table(["class", "variant", "pages", "re-access p50 (us)", "re-access p99 (us)", "swapped out (pages)",
                   "dropped (pages)", "resident (pages)", "major faults (all reps)"], rows)
    share = [[v, _est(s["variants"][v].get("reclaim_share_cold", {}).get("mean")),
              _est(s["variants"][v].get("squeeze_share_cold", {}).get("mean"))] for v in variants]
    ctx.doc.para(f"Share of reclaim taken from the cold classes ({', '.join(s.get('cold_classes', []))}):")
    ctx.doc.table(["variant", "share of swapped-out pages", "share of pages the limit took"], share)
    p99 = {v: [_v(s["variants"][v]["classes"].get(c), "reaccess_us", "p99", "value") or 0.0 for c in classes]
           for v in variants}
    err = {v: ([_v(s["variants"][v]["classes"].get(c), "reaccess_us", "p99", "lo") or 0.0 for c in classes],
               [_v(s["variants"][v]["classes"].get(c), "reaccess_us", "p99", "hi") or 0.0 for c in classes])
           for v in variants}
    path = figures.grouped_bars(classes, p99, ctx.fig(f"vm-p99-{run.run_id}.png"),
                                "Re-access latency per page, p99, by intent class", "p99 latency (us, log scale)",
                                errors=err, log=True)
    ctx.doc.figure(path, f"Per-class re-access p99 with 95% CIs ({suite.label})")
    swapped = {v: [100.0 * (_v(s["variants"][v]["classes"].get(c), "swapped_out_pages", "mean", "value") or 0.0)
                   / max(1, s["variants"][v]["classes"].get(c, {}).get("pages", 1)) for c in classes] for v in variants}
    path = figures.grouped_bars(classes, swapped, ctx.fig(f"vm-swapped-{run.run_id}.png"),
                                "Pages swapped out after the squeeze, by intent class", "% of the class's pages")
    ctx.doc.figure(path, f"Per-class share of pages swapped out ({suite.label})")
    h = s.get("headline", {})
    for key in ("damon", "mglru"):
        st = s.get(key) or {}
        if st:
            ctx.doc.para(f"{key.upper()}: {st.get('status')}" + (f" ({st.get('reason')})" if st.get("reason") else ""))
    ctx.summary.setdefault("vm", {})[suite.label] = {
        "decode_critical_swapped_out": {k: _v(h, f"{k}_decode_critical_swapped_out", "mean", "value")
                                        for k in ("baseline", "intent")},
        "decode_critical_p99_us": {k: _v(h, f"{k}_decode_critical_p99_us", "value") for k in ("baseline", "intent")},
    }


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("vm-bench") for s in ctx.suites):
        return
    ctx.doc.heading("KV arena under memory pressure (VM track)")
    for suite in ctx.suites:
        _suite(ctx, suite)
