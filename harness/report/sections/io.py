"""I/O priority section: critical-read latency per mode (CDFs, percentiles with CIs), interference, spill
throughput, block-layer classes, the sweep's Pareto plot, and cross-suite differences."""

from __future__ import annotations

import numpy as np

from harness.report import figures, fmt
from harness.report.context import ReportContext, Suite
from harness.stats import bootstrap_ratio

QS = ("p50", "p90", "p99", "p99.9")




def _classes(block: dict | None) -> str:
    if not block:
        return "-"
    parts = []
    for op in ("R", "W"):
        seen = block.get("by_op", {}).get(op, {})
        if seen:
            parts.append(f"{op}: " + ", ".join(f"{k} x{v}" for k, v in sorted(seen.items())))
    return "; ".join(parts) or "-"


def _bench_tables(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("io-bench")
    if run is None:
        return
    s = run.summary
    cfg = s.get("config", {})
    dev = cfg.get("device", {})
    ctx.doc.para(
        f"Suite {suite.label}: run {run.run_id}; engine {cfg.get('engine')}, scheduler {cfg.get('scheduler')}, "
        f"mapping {cfg.get('mapping')}, device {dev.get('path')} ({dev.get('kind')}), "
        f"{cfg.get('reps')} repetitions in alternating order; latency measured from each read's intended issue time."
    )
    rows = []
    series = {}
    for variant, m in s.get("modes", {}).items():
        rows.append([variant, m.get("reads"), *[fmt.estimate(m.get("latency_us", {}).get(q)) for q in QS],
                     f"{m.get('max_us', float('nan')):.4g}", fmt.estimate(m.get("interference_factor")),
                     fmt.estimate(m.get("spill_mb_s")), _classes(m.get("block_layer"))])
        if variant in run.sample_names():
            series[variant] = run.samples(variant) / 1000.0
    ctx.doc.table(["mode", "reads", *[f"{q} (us)" for q in QS], "max (us)", "interference (p99/unloaded p99)",
                   "spill MB/s", "priorities seen at the block layer"], rows)
    if series:
        path = figures.latency_cdf(series, ctx.fig(f"io-cdf-{run.run_id}.png"),
                                   f"Critical-read latency, {cfg.get('scheduler')}, {cfg.get('engine')}")
        ctx.doc.figure(path, f"Critical-read latency CDF per mode ({suite.label})")
    ctx.summary.setdefault("io", {})[suite.label] = {
        v: {"p99_us": m.get("latency_us", {}).get("p99", {}).get("value"),
            "interference_factor": (m.get("interference_factor") or {}).get("value"),
            "spill_mb_s": (m.get("spill_mb_s") or {}).get("value")}
        for v, m in s.get("modes", {}).items()
    }




def _sweep(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("io-sweep")
    if run is None:
        return
    s = run.summary
    pts = s.get("points", [])
    if not pts:
        return
    rows = [[p["scheduler"], p["variant"], p.get("mapping"), fmt.estimate(p.get("p99_us")), fmt.estimate(p.get("interference_factor")),
             fmt.estimate(p.get("spill_mb_s")), fmt.value(p.get("spill_retained")), "yes" if p.get("pareto") else "",
             "yes" if p.get("meets_goal") else ""] for p in pts]
    ctx.doc.para(f"Sweep {run.run_id} (suite {suite.label}): each scheduler x mapping under the same spill load.")
    ctx.doc.table(["scheduler", "variant", "mapping", "p99 (us)", "interference", "spill MB/s", "spill kept",
                   "Pareto", "meets goal"], rows)
    path = figures.pareto_scatter([(f"{p['scheduler']}/{p['variant']}", fmt.value(p.get("spill_mb_s")), fmt.value(p.get("p99_us")))
                                   for p in pts if fmt.value(p.get("spill_mb_s")) is not None and fmt.value(p.get("p99_us"))],
                                  ctx.fig(f"io-pareto-{run.run_id}.png"),
                                  "Spill throughput vs critical-read p99 (scheduler/mapping)")
    ctx.doc.figure(path, "Pareto plot: spill MB/s against critical-read p99; the frontier is dashed")
    goal = s.get("goal", {})
    ctx.summary.setdefault("io_sweep", {})[suite.label] = list(goal.get("met_by") or [])
    ctx.doc.para(f"Goal (interference <= {goal.get('interference_max')} with spill kept >= "
                 f"{goal.get('spill_retained_min')}): met by {', '.join(goal.get('met_by') or []) or 'nothing'}.")


def _differences(ctx: ReportContext) -> None:
    """p99 ratio between suites for each common mode, from raw samples, with bootstrap CIs."""
    runs = [(s, s.latest("io-bench")) for s in ctx.suites]
    runs = [(s, r) for s, r in runs if r is not None]
    if len(runs) < 2:
        return
    (s0, r0), rest = runs[0], runs[1:]
    rows = []
    for s1, r1 in rest:
        for variant in sorted(set(r0.sample_names()) & set(r1.sample_names())):
            if "-rep" in variant:
                continue
            est = bootstrap_ratio(r1.samples(variant).astype(float), r0.samples(variant).astype(float), 99, n_boot=400)
            rows.append([variant, f"{s1.label} / {s0.label}", f"{est.value:.3g} [{est.lo:.3g}, {est.hi:.3g}]"])
    if rows:
        ctx.doc.para("Critical-read p99 across suites (ratio of p99s, 95% bootstrap interval; 1 = no difference):")
        ctx.doc.table(["mode", "suites", "p99 ratio"], rows)


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("io-bench") or s.of_kind("io-sweep") for s in ctx.suites):
        return
    ctx.doc.heading("Decode-critical reads under spill pressure (I/O priority track)")
    for suite in ctx.suites:
        _bench_tables(ctx, suite)
        _sweep(ctx, suite)
    _differences(ctx)


__all__ = ["render", "np"]
