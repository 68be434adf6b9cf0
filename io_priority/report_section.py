"""The report's I/O section (registered as `kvds.report_sections` 10-io): critical-read latency per mode (CDFs,
percentiles with CIs), interference, spill throughput, block-layer classes, the sweep's Pareto plot and goal, the
fio-check goal, and cross-suite differences. Each run is read through its typed summary (io_priority/summary.py),
so a renamed key fails here rather than reading as missing; headline figures and verdict lines go to the Summary
through ReportContext.headline / .verdict."""

from __future__ import annotations

import numpy as np

from harness.report import fmt, plots
from harness.report.context import ReportContext, Suite
from harness.results import Run
from harness.stats import MIN_REPS, rep_ratio
from io_priority import fio, goal as goalmod, load_rule
from io_priority.clocks import host_share_text
from io_priority.summary import BenchSummary, FioCheckSummary, SweepPoint, SweepSummary, VariantFigures

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
    for run, model in _by_device(suite, "io-bench"):
        _bench_run(ctx, suite, run, model)


def _bench_run(ctx: ReportContext, suite: Suite, run: Run, model: bool) -> None:
    s = BenchSummary.from_json(run.summary)
    cfg = s.config or {}
    ctx.doc.para(
        f"Suite {suite.label}: run {run.run_id}; engine {cfg.get('engine')}, scheduler {cfg.get('scheduler')}, "
        f"mapping {cfg.get('mapping')}, on {device_label(run)}, "
        f"{cfg.get('reps')} repetitions in alternating order; latency measured from each read's intended issue time."
    )
    for name, v in ((s.goal or {}).get("verdicts") or {}).items():
        load = v.get("load") or {}
        ctx.doc.para(f"{name} on {device_label(run)}: {load.get('verdict') or v['status']}, from "
                     + "; ".join(v["text"]) + ".")
    rows = []
    series = {}
    modes = {v: VariantFigures.from_json(m) for v, m in (s.modes or {}).items()}
    for variant, m in modes.items():
        rows.append([variant, m.reads, *[fmt.estimate((m.latency_us or {}).get(q)) for q in QS],
                     fmt.number(m.max_us, why="no reads"),
                     fmt.estimate(m.interference_factor) if variant != "unloaded" else "- (the reference)",
                     fmt.estimate(m.spill_mb_s) if m.spill_mb_s else "- (no spill)",
                     _classes(m.block_layer)])
        if variant in run.sample_names():
            series[variant] = run.samples(variant) / 1000.0
    ctx.doc.table(["mode", "reads", *[f"{q} (us)" for q in QS], "max (us)", "interference (p99/unloaded p99)",
                   "spill MB/s", "priorities seen at the block layer"], rows)
    _clock_table(ctx, modes)
    if series:
        path = plots.latency_cdf(series, ctx.fig(f"io-cdf-{run.run_id}.png"),
                                   f"Critical-read latency, {cfg.get('scheduler')}, {cfg.get('engine')}")
        ctx.doc.figure(path, f"Critical-read latency CDF per mode ({suite.label}, {device_label(run)})")
    if model:  # the guest lab's model device: its own headline rows, beside this host's disk
        ctx.summary.setdefault("io_model", {})[suite.label] = {
            v: {"p99_us": fmt.value((m.latency_us or {}).get("p99")), "device": device_label(run)}
            for v, m in modes.items()}
        for variant in ("unloaded", "separated"):
            ctx.headline(f"critical-read p99, {variant}, model device (us)", suite.label,
                         fmt.value((modes[variant].latency_us or {}).get("p99")) if variant in modes else None)
        verdict = ((s.goal or {}).get("verdicts") or {}).get("separated")
        if verdict:
            ctx.verdict(suite.label, f"io bench on {device_label(run)}",
                        (verdict.get("load") or {}).get("verdict") or verdict["status"])
        return
    ctx.summary.setdefault("io", {})[suite.label] = {
        v: {"p99_us": fmt.value((m.latency_us or {}).get("p99")),
            "interference_factor": fmt.value(m.interference_factor),
            "spill_mb_s": fmt.value(m.spill_mb_s)}
        for v, m in modes.items()
    }
    fig = ctx.summary["io"][suite.label]
    for variant in ("unloaded", "baseline", "separated"):
        ctx.headline(f"critical-read p99, {variant} (us)", suite.label, fig.get(variant, {}).get("p99_us"))
    for key, what in (("interference_factor", "interference factor"), ("spill_mb_s", "spill MB/s")):
        for variant in ("baseline", "separated"):
            ctx.headline(f"{what}, {variant}", suite.label, fig.get(variant, {}).get(key))


def _clock_table(ctx: ReportContext, modes: dict[str, VariantFigures]) -> None:
    """Three clocks per read (stall-free) and the block layer's per class: which part of the excess over the
    unloaded reference the host's CPUs added (wake-up lateness) and which the device (service time)."""
    rows = []
    for variant, m in modes.items():
        c = m.stall_free
        if not c:
            continue
        inter = c.get("interference") or {}
        blk = m.block_service_us or {}
        st = m.stalls or {}
        rows.append([variant,
                     *[fmt.estimate((c.get(f"{k}_us") or {}).get("p99")) for k in ("end_to_end", "wakeup", "service")],
                     fmt.estimate(inter.get("end_to_end")) if variant != "unloaded" else "- (the reference)",
                     fmt.estimate(inter.get("service")) if variant != "unloaded" else "- (the reference)",
                     host_share_text(c.get("excess")) if variant != "unloaded" else "-",
                     "; ".join(f"{k} {fmt.estimate(v.get('p99'))}" for k, v in blk.items()) or "-",
                     f"{st.get('stalls', 0)} ({st.get('reads_affected', 0)} reads)"])
    if rows:
        ctx.doc.para("Three clocks per read, stall-free (reads a stall delayed are left out here and counted in the "
                     "last column; the table above keeps every read): end-to-end = wake-up lateness (host) + backlog + "
                     "service time (device); the block layer's issue -> complete per direction and class is the fourth "
                     "view.")
        ctx.doc.table(["mode", "e2e p99 (us)", "wake-up p99 (us)", "service p99 (us)", "interference e2e",
                       "interference service", "excess of the p99 tail", "block layer p99 (us) by class",
                       "stalls"], rows)


def _sweep(ctx: ReportContext, suite: Suite) -> None:
    """The sweep's table and its goal line, both from one set of verdicts (io_priority.goal.judge, re-run on the
    stored estimates, so a run recorded under an older rule is judged by today's): no row says "met" that the
    line below denies."""
    for run, model in _by_device(suite, "io-sweep"):
        _sweep_run(ctx, suite, run, model)


def _by_device(suite: Suite, kind: str) -> list[tuple[Run, bool]]:
    """The suite's newest finished run of `kind` on this host's disk and the newest on a model device (the guest
    lab's, `kvds run`'s io-model stage), host first; (run, on a model device)."""
    newest = suite.latest_by(kind, _is_model)
    return [(newest[model], model) for model in (False, True) if model in newest]


def _is_model(run: Run) -> bool:
    return ((run.summary.get("config") or {}).get("device") or {}).get("kind") == "model"


def device_label(run: Run) -> str:
    """Where a run's reads went, in words: a model device in the guest lab (with its clock), or this host's disk."""
    dev = (run.summary.get("config") or {}).get("device") or {}
    if dev.get("kind") == "model":
        clock = (run.meta.get("environment") or {}).get("clock") or "wall"
        return f"model device {dev.get('backing')} (null_blk, guest lab, clock {clock})"
    return f"this host's disk ({dev.get('kind')} {dev.get('path')})"


def _sweep_run(ctx: ReportContext, suite: Suite, run: Run, model: bool) -> None:
    s = SweepSummary.from_json(run.summary)
    pts = s.points or []
    if not pts:
        return
    loads = [(p.get("goal") or {}).get("load") for p in pts]
    for p, load in zip(pts, loads):
        p.pop("goal", None)
    goalmod.judge(pts, s.schedulers)
    for p, load in zip(pts, loads):
        load_rule.reapply(p, load)
    goal = goalmod.goal_summary(pts, s.schedulers)
    typed = [SweepPoint.from_json(p) for p in pts]
    rows = [[p.scheduler, p.variant, p.mapping, p.reps or "-", fmt.estimate(p.p99_us),
             fmt.estimate(p.interference_factor), fmt.estimate(p.interference_service), fmt.estimate(p.spill_mb_s),
             fmt.estimate(p.spill_retained_est) if p.spill_retained_est else
             fmt.number(p.spill_retained, ".2f", why="no spill"),
             {True: "yes", False: "", None: "- (no p99)"}[p.pareto], goalmod.verdict_cell(p.as_dict())] for p in typed]
    ctx.doc.para(f"Sweep {run.run_id} (suite {suite.label}) on {device_label(run)}: each scheduler x mapping under "
                 "the same spill load; a goal is met only when its whole 95% interval is on the right side.")
    ctx.doc.table(["scheduler", "variant", "mapping", "repetitions", "p99 (us)", "interference e2e (all reads)",
                   "interference service (stall-free, judged)", "spill MB/s", "spill kept", "Pareto", "goal"], rows)
    plotted = [(f"{p.scheduler}/{p.variant}", fmt.value(p.spill_mb_s), fmt.value(p.p99_us)) for p in typed]
    plotted = [t for t in plotted if t[1] is not None and t[2]]
    if plotted:
        path = plots.pareto_scatter(plotted, ctx.fig(f"io-pareto-{run.run_id}.png"),
                                      "Spill throughput vs critical-read p99 (scheduler/mapping)")
        ctx.doc.figure(path, "Pareto plot: spill MB/s against critical-read p99; the frontier is dashed")
    else:
        ctx.doc.para("No Pareto plot: no point of this sweep has a p99 with enough reads beyond it.")
    where = " (model device, guest lab)" if model else ""
    ctx.summary.setdefault("io_sweep_model" if model else "io_sweep", {})[suite.label] = list(goal["met_by"])
    ctx.headline(f"sweep goal met by{where} (interference <= 1.5, spill >= 50%, whole 95% interval)", suite.label,
                 ", ".join(goal["met_by"]) or "nothing")
    ctx.verdict(suite.label, f"io sweep{where}", goalmod.goal_line(goal))
    ctx.doc.para(goalmod.goal_line(goal) + ".")


FIO_GOAL = "fio-check: kvds's unloaded reader against fio"


def _fio_check(ctx: ReportContext) -> None:
    """kvds's reader against fio's (p50, and p99 in open loop, within 1 +- 10%), judged again by today's rule from
    the ratios the run stored (paired by repetition since 2026-12-01; the "pairing" of each ratio says so)."""
    rows = []
    for suite, run in ctx.latest("io-fio-check"):
        s = FioCheckSummary.from_json(run.summary)
        v = fio.summary_verdict(s.as_dict())
        tools = s.tools or {}
        rows.append([suite.label, run.run_id, s.mode, " / ".join(str((tools.get(t) or {}).get("reads", "-"))
                                                                 for t in ("kvds", "fio")),
                     fmt.estimate(s.p50_ratio_kvds_over_fio), fmt.estimate(s.p99_ratio_kvds_over_fio),
                     ((s.p50_ratio_kvds_over_fio or {}).get("pairing") or {}).get("rule", "unpaired (older run)"),
                     v.status])
        ctx.headline("fio-check p50 kvds/fio", suite.label, fmt.value(s.p50_ratio_kvds_over_fio))
        ctx.headline("fio-check p99 kvds/fio", suite.label, fmt.value(s.p99_ratio_kvds_over_fio))
        ctx.verdict(suite.label, FIO_GOAL, str(v))
    if rows:
        ctx.doc.para("kvds's unloaded reader against fio on the same device, region and engine, alternating "
                     "repetitions, compared on the same clock (submission -> completion); the goal is two-sided: "
                     "kvds / fio within 1 +- 10% (p50; open loop also p99), met only when the whole 95% interval "
                     "is inside the band.")
        ctx.doc.table(["suite", "run", "mode", "reads kvds / fio", "p50 kvds/fio", "p99 kvds/fio", "ratios",
                       "verdict"], rows)


def _rep_groups(run: Run, variant: str) -> list[np.ndarray]:
    """A variant's samples as its repetitions (<variant>-rep<k>.npy), in order."""
    names = run.sample_names()
    k = 0
    out = []
    while f"{variant}-rep{k}" in names:
        out.append(run.samples(f"{variant}-rep{k}").astype(float))
        k += 1
    return out


def _differences(ctx: ReportContext) -> None:
    """p99 ratio between suites for each common mode, from raw samples, resampled by repetition (a pooled
    bootstrap of reads ignores run-to-run drift and covers a third of the time it claims). Like with like: this
    host's disk against this host's disk, the guest lab's model device against the model device."""
    for model, where in ((False, "this host's disk"), (True, "the guest lab's model device")):
        _differences_on(ctx, [(s, r) for s in ctx.suites for r, m in _by_device(s, "io-bench") if m == model], where)


def _differences_on(ctx: ReportContext, runs: list[tuple[Suite, Run]], where: str) -> None:
    if len(runs) < 2:
        return
    (s0, r0), rest = runs[0], runs[1:]
    rows = []
    for s1, r1 in rest:
        for variant in sorted(set(r0.sample_names()) & set(r1.sample_names())):
            if "-rep" in variant:
                continue
            g0, g1 = _rep_groups(r0, variant), _rep_groups(r1, variant)
            if not g0 or not g1:
                rows.append([variant, f"{s1.label} / {s0.label}", "- (no per-repetition samples stored)", "-"])
                continue
            est = rep_ratio(g1, g0, 99.0, n_boot=400)
            rows.append([variant, f"{s1.label} / {s0.label}", fmt.estimate(est.as_dict()),
                         f"{len(g1)} / {len(g0)}"])
    if rows:
        ctx.doc.para(f"Critical-read p99 across suites, {where} (ratio of p99s, 95% interval over repetitions; 1 = no "
                     f"difference; fewer than {MIN_REPS} repetitions on a side: point estimate only):")
        ctx.doc.table(["mode", "suites", "p99 ratio", "repetitions"], rows)


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("io-bench") or s.of_kind("io-sweep") or s.of_kind("io-fio-check") for s in ctx.suites):
        return
    ctx.doc.heading("Decode-critical reads under spill pressure (I/O priority track)")
    for suite in ctx.suites:
        _bench_tables(ctx, suite)
        _sweep(ctx, suite)
    _fio_check(ctx)
    _differences(ctx)

