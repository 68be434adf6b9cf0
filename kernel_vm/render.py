"""What `kvds vm bench` and `kvds vm compare` print without --json, from the same typed summary --json emits
(harness/emit.py); every estimate through harness/report/fmt. Printing only: the figures are computed in
kernel_vm/summary.py and kernel_vm/paired_p99.py."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from harness.report.fmt import estimate as est
from harness.stats import verdict_from_dict
from kernel_vm.churn_summary import ChurnSummary
from kernel_vm.lazy_summary import LazySummary
from kernel_vm.overcommit_summary import OvercommitSummary
from kernel_vm.summary import BenchSummary, Comparison, CompareSummary


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def _rep_lines(s: BenchSummary, per_rep: list[dict[str, Any]]) -> list[str]:
    """PSI, taskstats, zswap and eBPF reclaim lines of one variant (means per repetition)."""
    psi = [r.get("psi_memory_us") or {} for r in per_rep]
    if any(psi):
        line = (f"  memory PSI during squeeze+re-access (system-wide, mean per rep): some "
                f"{_mean([p.get('some', 0) for p in psi]) / 1000:.1f} ms, full "
                f"{_mean([p.get('full', 0) for p in psi]) / 1000:.1f} ms")
    else:
        line = f"  memory PSI unavailable: {s.psi.get('reason', 'no /proc/pressure/memory')}"
    probes = [r.get("probes") or {} for r in per_rep]
    ts = [p["taskstats"] for p in probes if "taskstats" in p]
    bad = sum(1 for t in ts if "error" in t)
    ts = [t for t in ts if "error" not in t]
    if bad:
        line += f"; taskstats invalid in {bad} rep(s) (see per_rep[].probes.taskstats.error)"
    if ts and all("swapin" in t for t in ts):
        line += (f"; arena process swap-in delay {_mean([t['swapin']['delay_ns'] for t in ts]) / 1e6:.1f} ms/rep,"
                 f" reclaim delay {_mean([t['reclaim']['delay_ns'] for t in ts]) / 1e6:.1f} ms (taskstats)")
    lines = [line]
    zs = [r["zswap_after_squeeze"] for r in per_rep if r.get("zswap_after_squeeze")]
    if zs:
        lines.append("  zswap pool right after the squeeze (mean per rep): " + ", ".join(
            f"{k} {_mean([z.get(k, 0) for z in zs]):.0f}"
            for k in ("stored_pages", "pool_total_size", "written_back_pages", "reject_compress_poor")))
    rc = [p["reclaim"] for p in probes if "reclaim" in p]
    if rc:
        parts = []
        for role in ("parent", "arena"):
            for kind in ("memcg", "direct"):
                e = [x for x in (r.get(role, {}).get(kind) for r in rc) if x]
                if e:
                    n = sum(x["count"] for x in e)
                    parts.append(f"{role} {kind}: {n / len(rc):.0f} reclaims/rep, "
                                 f"{sum(x['pages_reclaimed'] for x in e) / len(rc):.0f} pages/rep, "
                                 f"mean {sum(x['total_ns'] for x in e) / max(1, n) / 1000:.0f} us")
        lines.append("  eBPF reclaim: " + ("; ".join(parts) or "no reclaim events from parent or arena"))
    return lines


def bench(s: BenchSummary) -> None:
    """`kvds vm bench`: per variant the class table and reclaim lines, the headline, the comparison, the layers."""
    console = Console(width=200)
    console.print(f"vm bench: swap={s.swap.get('kind')} ({s.swap.get('device')}), pressure={s.pressure_pct:g}% "
                  f"({s.pressure_mode or 'limit'}), reps={s.reps} (plot: vm-bench.png in the run directory)")
    for vname, v in s.variants.items():
        t = Table(title=f"{vname}: per class after the squeeze, re-access in decode order (95% CIs)")
        for col in ("class", "pages", "swapped out (mean)", "dropped", "resident", "major faults/rep",
                    "p50 us", "p99 us"):
            t.add_column(col, justify="right" if col != "class" else "left")
        for cls, c in v.classes.items():
            maj = c.major_faults["per_rep"]
            t.add_row(cls, str(c.pages), est(c.swapped_out_pages["mean"]), est(c.dropped_pages["mean"]),
                      est(c.resident_pages["mean"]), f"{sum(maj) / len(maj):.0f}",
                      est(c.reaccess_us["p50"]), est(c.reaccess_us["p99"]))
        console.print(t)
        console.print(f"  share of swapped-out pages from cold classes ({', '.join(s.cold_classes)}): "
                      f"{est(v.reclaim_share_cold['mean'])}; of all evicted (swapped+dropped): "
                      f"{est(v.eviction_share_cold['mean'])}; of the pages the squeeze itself took: "
                      f"{est(v.squeeze_share_cold['mean'])}")
        for line in _rep_lines(s, v.per_rep):
            console.print(line)
    h = s.headline
    console.print("[bold]headline[/]: decode-critical pages swapped out: "
                  f"{h.baseline} {est((h.baseline_decode_critical_swapped_out or {}).get('mean'))} vs "
                  f"{h.intent} {est((h.intent_decode_critical_swapped_out or {}).get('mean'))}")
    if h.baseline_decode_critical_p99_us is not None:
        console.print(f"  decode-critical re-access p99 (us): {h.baseline} {est(h.baseline_decode_critical_p99_us)}"
                      f" vs {h.intent} {est(h.intent_decode_critical_p99_us)}; ratio intent/baseline "
                      f"{est(h.decode_critical_p99_ratio_intent_over_baseline)}")
    if h.intent_damos:
        console.print(f"  {h.intent_damos}: decode-critical swapped out "
                      f"{est((h.intent_damos_decode_critical_swapped_out or {}).get('mean'))}" +
                      (f", p99 {est(h.intent_damos_decode_critical_p99_us)} us"
                       if h.intent_damos_decode_critical_p99_us else ""))
    comparison(s.comparison)
    for key in ("damon", "mglru", "ebpf", "psi", "mm_intent"):
        d = getattr(s, key)
        console.print(f"  {key}: {d.get('status')} - {d.get('reason', '')}")
    damos(s.damon.get("per_class") or {})
    console.print(f"  timer overhead p50/p99: {s.timer_overhead_ns['p50']:.0f}/{s.timer_overhead_ns['p99']:.0f} ns")
    console.print(f"  clock: {clock_words(s.clock)}")


def clock_words(clock: str) -> str:
    """What a latency in this run is: real time, or a QEMU guest's instruction-count time."""
    if not clock.startswith("icount:"):
        return "wall (real time)"
    shift = int(clock.split(":", 1)[1])
    return (f"{clock} (QEMU guest time: each guest instruction {2 ** shift} ns; a host stall of the vCPU is not "
            "in any latency)")


def comparison(comp: Comparison) -> None:
    """The guest-lab table: one row per variant (intervals over repetitions), verdicts by interval."""
    if not comp.variants and not comp.unavailable:
        return
    ref = comp.reference
    t = Table(title="decode-critical under the same budget and pressure (95% CIs over repetitions)"
                    + (f"; verdicts against {ref}" if ref else ""))
    for col in ("variant", "reps", "decode-critical swapped out", "decode-critical p99 us",
                "cold share of reclaim", "verdict: swapped out = 0", f"verdict: p99 vs {ref or 'reference'}'s"):
        t.add_column(col, justify="left" if col.startswith(("variant", "verdict")) else "right", overflow="fold")
    for name, row in comp.variants.items():
        v = row.verdicts
        t.add_row(name, str(row.reps), est(row.decode_critical_swapped_out["mean"]), est(row.decode_critical_p99_us),
                  est(row.reclaim_share_cold), verdict_from_dict(v.get("decode_critical_swapped_out_zero")),
                  verdict_from_dict(v.get("decode_critical_p99_no_worse_than_reference")) if name != ref
                  else "(reference)")
    for name, why in comp.unavailable.items():
        t.add_row(name, "0", f"unavailable: {why}", "", "", "", "")
    console = Console(width=200)
    console.print(t)
    if comp.reference_unavailable:
        console.print(f"  reference unavailable: {comp.reference_unavailable}")


def damos(per_class: dict[str, Any]) -> None:
    """DAMOS per class: the scheme and what it tried / applied (mean per repetition)."""
    if not per_class:
        return
    t = Table(title="DAMOS per class (mean per repetition)")
    for col in ("class", "variant", "action", "ops", "scope", "regions tried", "MiB tried", "regions applied",
                "MiB applied"):
        t.add_column(col, justify="left" if col in ("class", "variant", "action", "ops", "scope") else "right")
    for cls, c in per_class.items():
        if "left_out" in c:
            t.add_row(cls, "-", "-", "-", c["left_out"], "", "", "", "")
            continue
        for vname, v in c["variants"].items():
            t.add_row(cls, vname, c["action"], c["ops"], c["scope"], f"{np.mean(v['nr_tried']):.0f}",
                      f"{np.mean(v['sz_tried']) / 2**20:.1f}", f"{np.mean(v['nr_applied']):.0f}",
                      f"{np.mean(v['sz_applied']) / 2**20:.1f}")
    Console(width=200).print(t)


def compare(out: CompareSummary) -> None:
    """`kvds vm compare`: one verdict line per variant."""
    print(f"run {out.source_run}: decode-critical p{out.q:g} / {out.reference}'s, repetitions paired; "
          f"clock {clock_words(out.clock or 'wall')}")
    for name, row in out.variants.items():
        print(f"  {name:<32} {verdict_from_dict(row['verdict'])}  ({row['pairs']} pairs)")


def _mib(d: Any) -> Any:
    """A bytes figure ({value, lo, hi} or a number) in MiB, for est()."""
    if isinstance(d, dict):
        return {k: (v / 2**20 if k in ("value", "lo", "hi") and isinstance(v, (int, float)) else v)
                for k, v in d.items()}
    return d / 2**20 if isinstance(d, (int, float)) else d


def lazy(s: LazySummary) -> None:
    """`kvds vm lazy`: one table per mechanism, a row per pressure, verdicts against the reference by interval."""
    console = Console(width=220)
    console.print(f"vm lazy: arena {s.arena_bytes >> 20} MiB, {s.reps} reps per cell (alternating, layout-paired), "
                  f"reference {s.reference}; clock {clock_words(s.clock)}")
    for m in s.mappings:
        rows = [r for r in s.rows if r["mapping"] == m]
        if not rows:
            console.print(f"{m}: unavailable: {s.unavailable.get(m, 'did not run')}")
            continue
        t = Table(title=f"{m}: per pressure (mean per repetition [95% CI])" +
                        (" (reference)" if m == s.reference else f"; verdicts against {s.reference}"))
        for col in ("pressure %", "killed reps", "MiB to swap", "of which eager (apply)", "refaults",
                    "decode-critical swapped",
                    "decode-critical p99 us", "written fewer", "refaults fewer", "p99 no worse"):
            t.add_column(col, justify="left" if col.endswith(("fewer", "worse")) else "right", overflow="fold")
        for r in rows:
            v = r.get("verdicts") or {}
            t.add_row(f"{r['pressure_pct']:g}", str(r.get("killed_reps") or 0), est(_mib(r["written_bytes"]["mean"])),
                      est(_mib(r["written_in_apply_bytes"]["mean"])), est(r["refaults"]["mean"]),
                      est(r["decode_critical_swapped_out"]["mean"]), est(r["decode_critical_p99_us"]),
                      *(verdict_from_dict(v.get(k)) if v else "(reference)"
                        for k in ("written_fewer", "refaults_fewer", "p99_no_worse")))
        console.print(t)
    for cell, why in (s.killed or {}).items():
        console.print(f"  {cell}: arena process killed: {'; '.join(why)}")


def churn(s: ChurnSummary) -> None:
    """`kvds vm churn`: one row per mechanism, verdicts against madvise by interval."""
    console = Console(width=220)
    w = s.workload
    console.print(f"vm churn: {w['n_blocks']} blocks of {w['block_bytes'] >> 10} KiB, {w['requests']} requests "
                  f"({w['layout']}), batches of {w['batch']}, {w['steps']} steps, requests live {w['lifetime']} "
                  f"steps; {s.blocks_changing_per_step:.0f} blocks change hot/cold and "
                  f"{s.requests_changing_per_step:.2f} requests finish per step; one mm_intent registration: "
                  f"{s.intent_ranges or 'not expressible'} ranges; {s.reps} reps; clock {clock_words(s.clock)}")
    t = Table(title=f"keeping the kernel's view current (mean per step [95% CI over repetitions]; per second at "
                    f"{s.step_ms:g} ms per step); verdicts against {s.reference}")
    for col in ("mechanism", "calls/step", "calls/s", "CPU us/step", "CPU us p99 of a step", "CPU share of a step",
                "calls fewer", "CPU less"):
        t.add_column(col, justify="left" if col in ("mechanism", "calls fewer", "CPU less") else "right",
                     overflow="fold")
    for r in s.rows:
        v = r.get("verdicts") or {}
        t.add_row(r["mechanism"], est(r["calls_per_step"]["mean"]), est(r["calls_per_s"]["mean"]),
                  est(r["cpu_us_per_step"]["mean"]), est(r["cpu_us_step_p99"]),
                  est(r["cpu_share_of_step"]["mean"]),
                  *(verdict_from_dict(v.get(k)) if v else "(reference)" for k in ("calls_fewer", "cpu_less")))
    for name, why in s.unavailable.items():
        t.add_row(name, f"unavailable: {why}", "", "", "", "", "", "")
    console.print(t)
    for r in s.rows:
        if r.get("errors"):
            console.print(f"  {r['mechanism']}: refused calls: {'; '.join(r['errors'])}")


def overcommit(s: OvercommitSummary) -> None:
    """`kvds vm overcommit`: one table per mechanism, a row per critical tier; verdicts for the nearest tier."""
    console = Console(width=220)
    console.print(f"vm overcommit: {s.critical_bytes >> 10} KiB latency-critical ({s.critical_pct:g}% of the arena, "
                  f"{len(s.tier_blocks)} tiers ranked by {s.rank}) in a budget of {s.budget_bytes >> 10} KiB "
                  f"(pressure {s.pressure_pct:g}%); late: a block's slowest page read > {s.slo_us:g} us; {s.reps} "
                  f"reps; reference {s.reference}; clock {clock_words(s.clock)}; MGLRU {s.mglru}")
    top = len(s.tier_blocks) - 1
    for r in s.rows:
        killed = sum(r["killed"])
        t = Table(title=f"{r['mechanism']}" + (f": OOM-killed in {killed} of {len(r['killed'])} reps" if killed
                                               else "") + " (mean per repetition [95% CI])")
        for col in ("tier", "blocks", "pages swapped", "late blocks", "late share", "p99 us"):
            t.add_column(col, justify="right")
        for i in reversed(range(len(s.tier_blocks))):
            label = f"{i}" + (" (nearest)" if i == top else " (yields first)" if i == 0 else "")
            t.add_row(label, str(s.tier_blocks[i]), est(r["swapped_pages"][i]["mean"]),
                      est(r["late_blocks"][i]["mean"]), f"{r['late_share'][i]:.3f}", est(r["p99_us"][i]))
        t.add_row("spillable", "", est(r["swapped_pages"][-1]["mean"]), "", "", "")
        console.print(t)
        stuck = sum(r.get("limit_write_interrupted") or [])
        if stuck:
            console.print(f"  the limit write did not return in {stuck} of {len(r['killed'])} reps and was ended by "
                          f"a signal after {max(r['limit_write_s']):.1f} s (the kernel's memcg OOM loop did not "
                          f"yield the CPU to its victim)")
        v = r.get("verdicts") or {}
        if v:
            console.print(f"  nearest tier vs {s.reference}: late blocks {verdict_from_dict(v.get('late_fewer'))}; "
                          f"p99 {verdict_from_dict(v.get('p99_lower'))}")
        for i, kt in enumerate(r.get("kernel_tiers") or []):
            if kt:
                console.print(f"  rep {i} kernel tiers (pages kept/yielded/demoted): " + "; ".join(
                    f"tier {k}: {v['kept']}/{v['yielded']}/{v['demoted']}" for k, v in sorted(kt.items())))
        if r.get("intent_stats"):
            console.print("  mm_intent consumer (mean per rep): " +
                          ", ".join(f"{k} {val:.0f}" for k, val in r["intent_stats"].items()))
    for name, why in s.unavailable.items():
        console.print(f"{name}: unavailable: {why}")
