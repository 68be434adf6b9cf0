"""The I/O track's text output: every table and line `kvds io bench|sweep|fio-check|repro` prints without
--json, from the typed summaries (io_priority/summary.py); with --json, harness/emit.py prints the same summary
instead. Numbers go through harness/report/fmt (one "v [lo, hi]" / "(point estimate)" / "- (reason)" for every
track). Nothing here measures or judges: the verdicts printed are the ones the summaries hold."""

from __future__ import annotations

import math
import shlex
from typing import Any, Callable

from harness import stats
from harness.report import fmt
from io_priority import pairing
from io_priority.clocks import host_share_text
from io_priority.goal import GOAL_INTERFERENCE, goal_line, verdict_cell
from io_priority.summary import BenchPlan, BenchSummary, FioCheckSummary, ReproSummary, SweepSummary
from io_priority.sweep_points import p99


def _short(reason: str) -> str:
    """"n too small: 400 samples, p99 needs >= 1000" -> "n too small: 400 < 1000" (table cells stay narrow)."""
    if reason.startswith("n too small") and "needs >=" in reason:
        n = reason.split(":")[1].split()[0]
        return f"n too small: {n} < {reason.rsplit('>=', 1)[1].split()[0]}"
    return reason


def cell(e: dict[str, Any] | None) -> str:
    """An estimate as fmt.estimate prints it, its reason shortened for a table cell."""
    if isinstance(e, dict) and e.get("reason"):
        e = {**e, "reason": _short(e["reason"])}
    return fmt.estimate(e)


def value_cell(e: dict[str, Any] | None) -> str:
    """A percentile's value alone (fmt.number), or "-" with the reason it is not printed."""
    if not e:
        return "-"
    return fmt.number(e.get("value"), ".0f", why=_short(e.get("reason") or "no data"))


def _clean_cell(ov: dict[str, Any] | None) -> str:
    if not ov or ov.get("clean_fraction") is None:
        return "-"
    f = ov.get("clean_interference_factor")
    why = "no clean reads" if not ov.get("clean_reads") else "no unloaded reads"
    return f"{ov['clean_fraction']:.0%} / " + (cell(f) if f else f"- ({why})")


def print_table(modes: dict[str, Any], title: str, echo: Callable[[str], None] = print) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in ("variant", "mapping", "p50 us", "p99 us [95% CI]", "p99.9 us", "max us", "interference (p99)",
                "spill MB/s", "retained", "clean reads / IF", "reads", "block-layer classes"):
        t.add_column(col, overflow="fold")
    for label, m in modes.items():
        bl = m["block_layer"]["by_op"] if m["block_layer"] else {}
        classes = "; ".join(f"{op} " + ",".join(f"{p}:{n}" for p, n in sorted(c.items())) for op, c in bl.items())
        t.add_row(label, m["mapping"] or "-", value_cell(m["latency_us"]["p50"]),
                  cell(m["latency_us"]["p99"]), value_cell(m["latency_us"]["p99.9"]),
                  fmt.number(m.get("max_us"), ".0f", why="no reads"),
                  cell(m["interference_factor"]), cell(m["spill_mb_s"]),
                  f"{m['spill_retained']:.0%}" if m.get("spill_retained") is not None else "-",
                  _clean_cell(m.get("overlap")), str(m["reads"]), classes or "-")
    Console(width=200).print(t)
    print_clocks(modes)
    for label, m in modes.items():
        w = (m.get("spill_v2") or {}).get("window")
        if w:
            echo(f"{label} (spill v2): keeping half the spill needs {w['needed_mib_per_window']:.2f} MiB per "
                 f"{w['interval_ms']:.1f} ms read interval, written within the {w['free_ms']:.1f} ms the reads leave "
                 f"(a device writing {w['needed_write_mb_s_at_tail']:.0f} MB/s at the p95 of its batch times); the "
                 "largest batch whose learned p95 fitted, per repetition: "
                 + ", ".join(f"{x:.2f}" for x in w["largest_fitting_batch_mib_per_rep"]) + " MiB")
    for label, m in modes.items():
        wp = m.get("write_priority")
        if wp and wp["note"]:
            echo(f"{label}: {wp['note']}")


def _clock_p(c: dict[str, Any] | None, clock: str, q: str) -> str:
    return value_cell(((c or {}).get(f"{clock}_us") or {}).get(q))


def print_clocks(modes: dict[str, Any], title: str = "three clocks per read (stall-free; us)") -> None:
    """End-to-end and service-time interference side by side, wake-up lateness (host) and the block layer's
    issue -> complete per class (the fourth view), stalls counted apart."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in ("variant", "e2e p50", "e2e p99", "wake-up p99", "backlog p99", "service p50", "service p99",
                "interference e2e", "interference service", "excess of the p99 tail", "block layer R p99 by class",
                "stalls (reads delayed)"):
        t.add_column(col, overflow="fold")
    for label, m in modes.items():
        c = m.get("stall_free") or m.get("clocks") or {}
        inter = c.get("interference") or {}
        blk = m.get("block_service_us") or {}
        blk_r = "; ".join(f"{k[2:]} {value_cell(v.get('p99'))}" for k, v in blk.items() if k.startswith("R "))
        st = m.get("stalls") or {}
        t.add_row(label, _clock_p(c, "end_to_end", "p50"), _clock_p(c, "end_to_end", "p99"),
                  _clock_p(c, "wakeup", "p99"), _clock_p(c, "backlog", "p99"), _clock_p(c, "service", "p50"),
                  _clock_p(c, "service", "p99"),
                  cell(inter.get("end_to_end")) if label != "unloaded" else "(reference)",
                  cell(inter.get("service")) if label != "unloaded" else "(reference)",
                  host_share_text(c.get("excess")) if label != "unloaded" else "-",
                  blk_r or "-", f"{st.get('stalls', 0)} ({st.get('reads_affected', 0)})")
    Console(width=220).print(t)


def sweep(summary: SweepSummary) -> None:
    """`kvds io sweep`: the points' table, the unloaded references, each verdict and the goal line."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="kvds io sweep: critical-read p99 vs spill MB/s (* = Pareto frontier, goal: IF <= 1.5 and "
                    "spill >= 50% of baseline, judged from the whole 95% interval)")
    for col in ("scheduler", "variant", "reps", "p99 us [95% CI]", "interference e2e (all reads)",
                "interference e2e (stall-free)", "interference service (stall-free, judged)", "excess of the tail",
                "stalls", "spill MB/s [95% CI]", "retained", "clean reads", "Pareto", "goal"):
        t.add_column(col, overflow="fold")
    key = lambda p: (p["scheduler"], p99(p) if p99(p) is not None else math.inf)  # noqa: E731
    for p in sorted(summary.points, key=key):
        ov = p.get("overlap") or {}
        t.add_row(p["scheduler"], p["variant"], str(p.get("reps") or "-"), cell(p["p99_us"]),
                  cell(p["interference_factor"]),
                  cell(p.get("interference_e2e_stall_free")),
                  cell(p.get("interference_service")), host_share_text(p.get("excess")),
                  str(p.get("stalls")) if p.get("stalls") is not None else "-",
                  cell(p["spill_mb_s"]), cell(p.get("spill_retained_est"))
                  if p.get("spill_retained_est") else "-",
                  f"{ov['clean_fraction']:.0%}" if ov.get("clean_fraction") is not None else "-",
                  {True: "*", False: "", None: "- (no p99)"}[p["pareto"]], verdict_cell(p))
    Console(width=240).print(t)
    for sched, doc in summary.schedulers.items():
        u = doc["modes"]["unloaded"]["latency_us"]
        print(f"unloaded reference under {sched} (us): p50 {cell(u['p50'])}, p99 {cell(u['p99'])}")
    for sched, doc in summary.schedulers.items():
        for label, m in doc["modes"].items():
            wp = m.get("write_priority")
            if wp and wp.get("note"):
                print(f"{sched}/{label}: {wp['note']}")
    print("clean reads: no spill write in flight at issue nor submitted during the read (ioload --ctx-out); "
          "their interference is what pacing cannot remove")
    for p in summary.points:
        g = p.get("goal") or {}
        if g.get("status") in (stats.MET, stats.MISSED, stats.INCONCLUSIVE):
            print(verdict_line(f"{p['scheduler']}/{p['variant']}", g["status"], g.get("text", []), g.get("load"),
                               p.get("end_to_end")))
    print(host_load_line([m for doc in summary.schedulers.values() for m in doc["modes"].values()]))
    goal = summary.goal
    reps = (summary.config or {}).get("reps")
    if isinstance(reps, int) and reps < stats.MIN_REPS:
        print(f"{reps} repetition{'s' if reps != 1 else ''} < {stats.MIN_REPS}: point estimates only (marked as such), "
              "so every goal is inconclusive (n too small); rerun with --reps 3 or more to judge")
    print(goal_line(goal))
    if goal.get("met_against_unstable_reference"):
        print("within the goal's intervals but against an unloaded reference whose repetitions typically lay more "
              "than 1.5x apart (not claimed): " + ", ".join(goal["met_against_unstable_reference"]))
    rounds = (summary.config or {}).get("rounds") or []
    if rounds:
        last = rounds[-1]
        print(f"{len(rounds)} round{'s' if len(rounds) != 1 else ''} in {last.get('elapsed_s')} s; repetitions: "
              + "; ".join(f"{s_}: " + ", ".join(f"{v} {n}" for v, n in reps_.items())
                          for s_, reps_ in (last.get("reps") or {}).items() if isinstance(reps_, dict))
              + f"; stopped: {last.get('stop')}")
    print("plot: pareto.png in the run directory (spill MB/s against p99, Pareto frontier marked)")
    best = goal.get("best_clean_interference")
    if best:
        print(f"best clean-read interference with >= 50% spill kept: {cell(best)} ({best['point']})"
              + (": interference the pacer cannot see" if best["value"] > GOAL_INTERFERENCE else ""))


def pairing_note(e: dict[str, Any] | None) -> str:
    """", paired by repetition (60 pairs)" after a ratio, or the reason it is not paired."""
    how = (e or {}).get("pairing")
    if not how:
        return ""
    if how["rule"] == pairing.PAIRED:
        return f", {how['rule']} ({how['pairs']} pairs run back to back)"
    return f", {how['rule']}: {how.get('why', '')}"


def fio_check(summary: FioCheckSummary) -> None:
    """`kvds io fio-check`: each tool's figures, the ratios kvds / fio and the verdict (latencies in us)."""
    cfg = summary.config
    print(f"unloaded {summary.mode or 'unloaded-qd1'} {cfg['workload']['read_bs'] // 1024} KiB random O_DIRECT "
          f"reads at QD1, engine {cfg['engine']}, {cfg['device']['path']} ({cfg['scheduler']}), {cfg['reps']} "
          f"alternating reps x {cfg['workload']['duration_s']:g} s; compared: "
          f"{summary.compared_clock or 'latency'}")
    for name, t in summary.tools.items():
        lat = t["latency_us"]
        print(f"  {name:5s} reads {t['reads']:7d}  latency (us): p50 {cell(lat['p50'])}  p99 {cell(lat['p99'])}"
              f"  p99.9 {value_cell(lat['p99.9'])}  per-rep p50 {', '.join(f'{x:.1f}' for x in t['per_rep_p50_us'])}")
    for name, t in summary.tools.items():
        if "p50_ratio_over_fio" in t:
            print(f"  {name} ({t['ioload_options']}): p50 / fio = {cell(t['p50_ratio_over_fio'])}")
    r = summary.p50_ratio_kvds_over_fio
    print(f"  p50 kvds/fio = {cell(r)}{pairing_note(r)}")
    if summary.p99_ratio_kvds_over_fio:
        r99 = summary.p99_ratio_kvds_over_fio
        print(f"  p99 kvds/fio = {cell(r99)}{pairing_note(r99)}")
    k = summary.tools["kvds"]
    if k.get("end_to_end_us"):
        print(f"  kvds end-to-end (us, from the intended time, no fio counterpart): p50 "
              f"{cell(k['end_to_end_us']['p50'])}, p99 {cell(k['end_to_end_us']['p99'])}; "
              f"wake-up p99 {cell((k.get('wakeup_us') or {}).get('p99'))}")
    print(f"  verdict: {stats.verdict_from_dict(summary.goal)}")


def print_compare(cmp: dict[str, Any], echo: Any = print) -> None:
    """A markdown table: one row per point, one column per sweep, and whether the verdict repeated."""
    n = len(cmp["runs"])
    echo("| point | "
         + " | ".join(f"run {i + 1}: IF service (judged) / kept / stalls / reps -> verdict" for i in range(n))
         + " | same? |")
    echo("|---|" + "---|" * n + "---|")
    for r in cmp["rows"]:
        cells = [f"{c['text']} -> **{c['status']}**" if c else "-" for c in r["cells"]]
        echo(f"| {r['point']} | " + " | ".join(cells) + f" | {'yes' if r['same'] else 'NO'} |")
    echo(f"runs: {', '.join(cmp['runs'])}; sweep seconds: {cmp['elapsed_s']}")
    echo(f"verdicts repeated: {cmp['repeated']} of {cmp['judged']} judged points")


def print_predict(pred: dict[int, dict[str, Any]], runs: int = 3, echo: Any = print) -> None:
    for k, d in pred.items():
        echo(f"{k} repetitions per variant ({d['sims']} simulated groups of {runs} sweeps): every point repeats in "
             f"{d['all_same']:.0%}; sweep {d['seconds_median']:.0f} s (median), {d['seconds_max']:.0f} s (max)")
        for name, p in d["points"].items():
            echo(f"  {name}: met {p['met']:.0%}, missed {p['missed']:.0%}, inconclusive {p['inconclusive']:.0%}; "
                 f"same verdict in {runs} sweeps {p['same']:.0%}")


def bench(summary: BenchSummary) -> None:
    """`kvds io bench`: the variants' table, the three clocks, and the goal's verdict for "separated"."""
    cfg = summary.config
    print_table(summary.modes, f"kvds io bench: {cfg['engine']} on {cfg['device']['path']} ({cfg['scheduler']}), "
                f"{cfg['reps']} reps x {cfg['workload']['duration_s']:g} s")
    for name, v in ((summary.goal or {}).get("verdicts") or {}).items():
        print(verdict_line(name, v["status"], v["text"], v.get("load"), v.get("end_to_end")))
    print(host_load_line(list(summary.modes.values())))


def verdict_line(name: str, status: str, text: list[str], load: dict[str, Any] | None,
                 end_to_end: dict[str, Any] | None) -> str:
    """One point's verdict with the intervals it rests on, worded by the host-load rule (io_priority/load_rule.py):
    "MET on stall-free, unloaded repetitions (all 12) from ...", or "not judged: host busy (...); ..."."""
    e2e = f" [beside it, {stats.verdict_from_dict(end_to_end)}]" if end_to_end else ""
    if not load:  # a run recorded before the host's load was measured
        return f"{name}: {status.upper()} from " + "; ".join(text) + e2e
    head, _, rest = load["verdict"].partition(" ")
    if load.get("judged_on") is None:
        return f"{name}: {load['verdict']}; all repetitions: " + "; ".join(text) + e2e
    return f"{name}: {head.upper()} {rest} from " + "; ".join(text) + e2e


def host_load_line(modes: list[dict[str, Any]]) -> str:
    """How busy the host was over the run's repetitions, against the stated threshold."""
    loads = [m["host_load"] for m in modes if m.get("host_load")]
    if not loads:
        return "host load: not recorded"
    busy, n = sum(x["busy_reps"] for x in loads), sum(len(x["per_rep"]) for x in loads)
    return (f"host load: {busy} of {n} repetitions busy ({loads[0]['threshold']}); other work at most "
            f"{max(x['foreign_cores_max'] for x in loads):.2f} cores, steal at most "
            f"{max(x['steal_share_max'] for x in loads):.1%}")


def repro(summary: ReproSummary) -> None:
    """`kvds io repro`: which rule judged the runs, the comparison, the prediction."""
    rule = summary.rule
    print("verdicts: " + ("as each run judged them" if rule == "stored" else
                          f"re-judged from the samples, interference {pairing.PAIRED} (the repetitions that ran "
                          "side by side with the reference)" if rule == "paired" else
                          "re-judged from the samples, interference unpaired"))
    print_compare(summary.compare)
    if summary.predict:
        print(f"predicted with the {summary.predict_rule} rule")
        print_predict({int(k): v for k, v in summary.predict.items()})


def bench_dry_run(plan: BenchPlan) -> None:
    """`kvds io bench --dry-run`: the device, the order and every ioload command a bench would start."""
    dev = plan.device
    print(f"would set up {dev['path']} ({dev.get('kind')}; KV {dev['kv_bytes'] >> 20} MiB + spill "
          f"{dev['spill_bytes'] >> 20} MiB), scheduler {plan.scheduler}, {len(plan.rep_order)} repetitions "
          f"in this order: " + ", ".join(f"{v} {r + 1}" for r, v in plan.rep_order))
    for name, v in plan.variants.items():
        print(f"  {name}: mapping {v['mapping'] or '-'}; applies {v['applied'] or 'nothing (the reader alone)'}")
    for c in plan.commands:
        for role in ("reader", "writer"):
            if c.get(role):
                print(f"  rep {c['rep'] + 1} {c['variant']} {role}: {shlex.join(c[role])}")
    print("nothing was set up or started (--dry-run)")

