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
