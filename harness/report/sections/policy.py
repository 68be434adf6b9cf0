"""Policy section: the simulator's comparison over seeds, and the replay of each policy on this kernel."""

from __future__ import annotations

from harness.report import figures, fmt
from harness.report.context import ReportContext, Suite

COMPARE_COLS = (("dc_miss_ratio", "decode-critical miss / access", 1.0), ("step_p50_us", "step p50 (ms)", 1e-3),
                ("step_p99_us", "step p99 (ms)", 1e-3), ("spills", "spills", 1.0), ("prefetches", "prefetches", 1.0))




def _compare(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("policy-compare")
    if run is None:
        return
    s = run.summary
    cfg = run.meta.get("config", {})
    seeds = cfg.get("seeds")
    ctx.doc.para(f"Simulated (suite {suite.label}, run {run.run_id}): profile "
                 f"{(cfg.get('profile') or {}).get('name', '?')}, seeds {seeds}; means with 95% t intervals over seeds. "
                 "Misses are counted per decode-critical access.")
    rows = [[p, *[fmt.estimate(m.get(k), sc) for k, _, sc in COMPARE_COLS]] for p, m in s.items()]
    ctx.doc.table(["policy", *[c[1] for c in COMPARE_COLS]], rows)
    ctx.summary.setdefault("policy", {})[suite.label] = {p: (m.get("dc_miss_ratio") or {}).get("value")
                                                         for p, m in s.items()}


def _replay(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("replay")
    if run is None:
        return
    s = run.summary
    cfg = run.meta.get("config", {})
    ctx.doc.para(f"Replayed on this kernel (run {run.run_id}): device {cfg.get('device')} ({cfg.get('scheduler')}), "
                 f"mapping {cfg.get('mapping')}, {cfg.get('reps')} repetition(s); the fast tier is a "
                 f"memory-cgroup-limited arena, spills and misses are real O_DIRECT I/O.")
    real_ci = s.get("real_ci", {})
    rows = []
    for p, r in s.get("rows", {}).items():
        ci = real_ci.get(p, {})
        rows.append([p, int(r.get("dc_accesses", 0)), int(r.get("dc_misses", 0)), f"{r.get('dc_miss_ratio', 0):.4f}",
                     f"{r.get('sim_p50_us', 0):.4g}", f"{r.get('sim_p99_us', 0):.4g}",
                     fmt.estimate(ci.get("50.0")) if ci else f"{r.get('real_p50_us', 0):.4g}",
                     fmt.estimate(ci.get("99.0")) if ci else f"{r.get('real_p99_us', 0):.4g}"])
    ctx.doc.table(["policy", "dc accesses", "dc misses", "miss / access", "simulated step p50 (us)",
                   "simulated step p99 (us)", "replayed step p50 (us)", "replayed step p99 (us)"], rows)
    series = {}
    for p in s.get("rows", {}):
        name = f"{p}-real-step-us"
        if name in run.sample_names():
            series[p] = run.samples(name)
    if series:
        path = figures.latency_cdf(series, ctx.fig(f"replay-cdf-{run.run_id}.png"),
                                   "Replayed decode-step latency per policy (real kernel)", what="decode steps")
        ctx.doc.figure(path, "Decode-step latency CDF per policy, replayed on this kernel")
    ctx.summary.setdefault("replay", {})[suite.label] = {
        p: {"dc_miss_ratio": r.get("dc_miss_ratio"), "real_p99_us": r.get("real_p99_us")}
        for p, r in s.get("rows", {}).items()}


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("policy-compare") or s.of_kind("replay") for s in ctx.suites):
        return
    ctx.doc.heading("Policies: simulated and replayed on a real kernel")
    for suite in ctx.suites:
        _compare(ctx, suite)
        _replay(ctx, suite)
