"""The report's policy section (registered as `kvds.report_sections` 50-policy): the simulator's comparison over
seeds (contenders, then offline references), the track's goals re-judged from each goals run's per-seed figures with
today's goals and rule (kv_policy.goals), the capacity sweep, and the replay of each policy on this kernel
(simulated vs replayed). Each run's summary.json is read through its typed summary's `from_json`
(kv_policy/*_run.py), so a renamed key fails here instead of reading as missing. A run on a serving trace says who
assigned its priorities (kvds's rule and seeds). Headline figures and the goals'
verdict lines go to the Summary through ReportContext.headline / .verdict."""

from __future__ import annotations

import shutil

from kv_policy import goals as g
from kv_policy.compare_run import CompareSummary, PolicyFigures, VersusFigures
from kv_policy.goals_run import GoalsSummary
from kv_policy.replay_run import ReplayRow, ReplaySummary
from kv_policy.sweep_run import SweepSummary
from harness.report import fmt, plots
from harness.report.context import ReportContext, Suite
from harness.results import Run
from harness.stats import Estimate, Verdict

COMPARE_COLS = (("dc_miss_ratio", "decode-critical miss / access", 1.0),
                ("hi_miss_ratio", "high-priority miss / access", 1.0),
                ("slo_attainment", "SLO attainment", 1.0), ("slo_high", "SLO attainment, high priority", 1.0),
                ("goodput_tok_s", "goodput (tok/s)", 1.0), ("step_p99_us", "step p99 (ms)", 1e-3),
                ("spills", "spills", 1.0), ("prefetches", "prefetches", 1.0))
REFERENCES = ("MIN", "PrioMIN")  # offline bounds: they read the future


def _is_ref(name: str) -> bool:
    return name.split(":")[0] in REFERENCES


def _compare(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("policy-compare")
    if run is None:
        return
    summary = CompareSummary.from_json(run.summary)
    s = summary.policies or {}
    ctx.doc.para(f"Simulated (suite {suite.label}, run {run.run_id}): {summary.source}, seeds "
                 f"{fmt_seeds(summary.seeds or [])}, fast tier {summary.capacity}; means with 95% t intervals over "
                 "seeds. "
                 "Misses are counted per decode-critical access; SLO attainment is the share of request-steps whose "
                 "step (compute + KV stall) met the request's TPOT deadline. Rows marked 'offline bound' read the "
                 "whole future and are references, not contenders; '-' is a figure with no data."
                 + (f" {summary.priorities[0].upper()}{summary.priorities[1:]}." if summary.priorities else ""))
    figs = {p: PolicyFigures.from_json(m) for p, m in s.items()}
    rows = [[p + (" (offline bound)" if _is_ref(p) else ""),
             *[fmt.estimate(getattr(f, k), sc) for k, _, sc in COMPARE_COLS]]
            for p, f in sorted(figs.items(), key=lambda kv: _is_ref(kv[0]))]
    ctx.doc.table(["policy", *[c[1] for c in COMPARE_COLS]], rows)
    vs = summary.versus_lru or {}
    if vs:
        ctx.doc.table(["policy (paired with LRU over seeds)", "miss cut vs LRU", "LRU-to-MIN gap closed",
                       "high-priority SLO gain", "SLO gain"],
                      [[p, fmt.estimate(r.dc_miss_cut_vs_lru), fmt.estimate(r.gap_to_min_closed),
                        fmt.estimate(r.slo_high_minus_lru), fmt.estimate(r.slo_minus_lru)]
                       for p, r in ((p, VersusFigures.from_json(d)) for p, d in vs.items())])
    ctx.summary.setdefault("policy", {})[suite.label] = {p: fmt.value(m, "dc_miss_ratio") for p, m in s.items()}
    for p in ("ExpectedNextUse", "LRU"):
        ctx.headline(f"simulated decode-critical miss / access, {p}", suite.label,
                     ctx.summary["policy"][suite.label].get(p))


def goal_name(profile: str, policy: str, what: str) -> str:
    """A goal's name in the Summary: the same goal of two runs (or suites) is one row."""
    return f"policy goal: {what} of {policy} on {profile}"


def run_verdicts(run: Run) -> list[tuple[str, str, str, Verdict]]:
    """(profile, policy, what, verdict) of a goals run: judged again from its per-seed figures with today's goals
    and rule; a run without per_seed.json gives back the verdicts it stored."""
    if (run.path / "per_seed.json").exists():
        per_profile = run.read_json("per_seed")
        return [(goal.profile, goal.policy, goal.what, g.judge(goal, per_profile[goal.profile]))
                for goal in g.GOALS + g.TRACE_GOALS if set(g.needs(goal)) <= set(per_profile.get(goal.profile, {}))]
    out = []
    for v in GoalsSummary.from_json(run.summary).verdicts:
        est = Estimate(*(float("nan") if v.get(k) is None else float(v[k]) for k in ("value", "lo", "hi")),
                       v.get("conf", 0.95))
        out.append((v.get("profile", "?"), v.get("policy", "?"), v.get("what", v.get("goal", "?")),
                    Verdict(v.get("status", "?"), v.get("goal", "?"), est, v.get("reason", ""))))
    return out


def _goals(ctx: ReportContext, suite: Suite) -> None:
    """Every goals run of the suite (a run may cover some profiles only, e.g. split across two cores)."""
    for run in suite.finished("policy-goals"):
        cfg = run.meta.get("config", {})
        stored = GoalsSummary.from_json(run.summary)
        source = stored.source or "profiles " + ", ".join(cfg.get("profiles") or [])
        ctx.doc.para(f"Policy goals (run {run.run_id}, {source}"
                     f", seeds {fmt_seeds(cfg.get('seeds') or [])}), judged by the whole 95% interval (met / missed / "
                     "inconclusive)" + (f"; {stored.priorities}" if stored.priorities else "") + ":")
        rows = []
        for profile, policy, what, v in run_verdicts(run):
            rows.append([profile, policy, v.goal, v.status, fmt.estimate(v.as_dict())])
            if policy != g.PRIO_BOUND:  # the offline bound's row is a feasibility check, not a goal
                ctx.verdict(suite.label, goal_name(profile, policy, what), str(v))
        ctx.doc.table(["profile", "policy", "goal", "verdict", "value [95% CI]"], rows)


def fmt_seeds(seeds: list[int]) -> str:
    """'400-439' for a contiguous range, else the list."""
    if seeds and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(str(s) for s in seeds)


def _sweep(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("policy-sweep")
    if run is None:
        return
    sweep = SweepSummary.from_json(run.summary)
    by_fraction = sweep.by_fraction or {}
    fractions = sorted(by_fraction, key=float)
    policies = sweep.policies or (list(by_fraction[fractions[0]]) if fractions else [])
    ctx.doc.para(f"Capacity sweep (run {run.run_id}): {sweep.metric} on {sweep.source}, by fast-tier fraction of "
                 f"peak live KV; every row simulated on the same traces, MIN the floor no eviction order beats"
                 + (f". {sweep.priorities[0].upper()}{sweep.priorities[1:]}." if sweep.priorities else "."))
    ctx.doc.table(["policy", *[f"{f}x" for f in fractions]],
                  [[p + (" (offline bound)" if _is_ref(p) else ""),
                    *[fmt.estimate(by_fraction[f].get(p)) for f in fractions]] for p in policies])
    ctx.summary.setdefault("policy_sweep", {})[suite.label] = {
        f: {p: fmt.value(by_fraction[f].get(p)) for p in policies} for f in fractions}
    png = run.path / "sweep.png"
    if png.exists():
        dest = ctx.fig(f"sweep-{run.run_id}.png")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, dest)
        ctx.doc.figure(dest, "Miss ratio against fast-tier size per policy; MIN (dashed) is the floor for eviction")


def _replay(ctx: ReportContext, suite: Suite) -> None:
    run = suite.latest("replay")
    if run is None:
        return
    s = ReplaySummary.from_json(run.summary)
    cfg = run.meta.get("config", {})
    ctx.doc.para(f"Replayed on this kernel (run {run.run_id}, trace {s.trace}): device {cfg.get('device')} "
                 f"({cfg.get('scheduler')}), "
                 f"mapping {cfg.get('mapping')}, {cfg.get('reps')} repetition(s); the fast tier is a "
                 f"memory-cgroup-limited arena, spills and misses are real O_DIRECT I/O. Stall = a decode step's KV "
                 f"time; SLO attainment adds the modelled compute time to each stall. Replayed figures: t intervals "
                 f"over repetitions; ratio = replayed / simulated stall p99.")
    rows = []
    typed = {p: ReplayRow.from_json(r) for p, r in s.rows.items()}
    for p, r in typed.items():
        rows.append([p + (" (offline bound)" if _is_ref(p) else ""), fmt.number(r.dc_accesses, ".0f"),
                     fmt.number(r.dc_misses, ".0f"), fmt.number(r.dc_miss_ratio, ".4f"),
                     fmt.number(r.sim_stall_p99_us if r.sim_stall_p99_us is not None else r.sim_p99_us, ".4g"),
                     fmt.estimate(r.real_stall_p99_us if r.real_stall_p99_us is not None else r.real_p99_us),
                     fmt.estimate(r.p99_ratio_real_to_sim),
                     fmt.number(r.sim_slo, ".3f"), fmt.estimate(r.real_slo)])
    ctx.doc.table(["policy", "dc accesses", "dc misses", "miss / access", "simulated stall p99 (us)",
                   "replayed stall p99 (us)", "replayed / simulated p99", "simulated SLO attainment",
                   "replayed SLO attainment"], rows)
    vs = s.stall_p99_minus_lru
    if vs:
        ctx.doc.table(["policy vs LRU (paired by repetition)", "replayed stall p99 difference (us)",
                       "replayed stall p99 ratio (geometric mean)"],
                      [[p, fmt.estimate(d.get("difference_us")), fmt.estimate(d.get("ratio"))] for p, d in vs.items()
                       if isinstance(d, dict)])
    series = {}
    for p in s.rows:
        name = f"{p}-real-step-us"
        if name in run.sample_names():
            series[p] = run.samples(name)
    if series:
        path = plots.latency_cdf(series, ctx.fig(f"replay-cdf-{run.run_id}.png"),
                                   "Replayed decode-step latency per policy (real kernel)", what="decode steps")
        ctx.doc.figure(path, "Decode-step latency CDF per policy, replayed on this kernel")
    ctx.summary.setdefault("replay", {})[suite.label] = {
        p: {"dc_miss_ratio": r.dc_miss_ratio, "real_p99_us": r.real_p99_us} for p, r in typed.items()}
    for p in ("ExpectedNextUse", "LRU"):
        ctx.headline(f"replayed decode-step p99 (us), {p}", suite.label,
                     ctx.summary["replay"][suite.label].get(p, {}).get("real_p99_us"))


def render(ctx: ReportContext) -> None:
    kinds = ("policy-compare", "policy-goals", "policy-sweep", "replay")
    if not any(s.of_kind(k) for s in ctx.suites for k in kinds):
        return
    ctx.doc.heading("Policies: simulated and replayed on a real kernel")
    for suite in ctx.suites:
        _compare(ctx, suite)
        _goals(ctx, suite)
        _sweep(ctx, suite)
        _replay(ctx, suite)
