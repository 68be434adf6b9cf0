"""`kvds vm bench`: the KV arena under memory pressure, baseline vs intent mapping (see kernel_vm/README.md)."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from harness.cli_args import add_json_flag, percent, positive_int, require_root
from harness.errors import UserError
from harness.mapping import DEFAULT_MAPPING
from harness.remote import add_target_args
from kernel_vm.mix import DEFAULT_MIX, format_mix
from kernel_vm.phases import PRESSURE_MODES
from kernel_vm.swap_backend import BACKENDS
from harness.results import dumps as strict_dumps
from harness.stats import verdict_from_dict

def register(sub: argparse._SubParsersAction) -> None:
    vm = sub.add_parser("vm", help="the KV arena under memory pressure (madvise, memcg, swap, DAMON, MGLRU)")
    verbs = vm.add_subparsers(dest="vm_command", metavar="VERB", parser_class=type(vm))
    verbs.required = True
    b = verbs.add_parser("bench", help="baseline (no intent) vs an intent mapping under memcg pressure")
    b.add_argument("--mapping", default=DEFAULT_MAPPING,
                   help=f"intent mapping, or several comma-separated (default {DEFAULT_MAPPING})")
    b.add_argument("--reference", default=None,
                   help="one of --mapping the others are judged against (e.g. memcg-protect): decode-critical "
                        "swapped out and re-access p99 verdicts by interval")
    b.add_argument("--baseline", default="none", help="the no-intent reference mapping (default none)")
    b.add_argument("--arena-mb", type=positive_int, default=256, help="arena size in MiB (default 256)")
    b.add_argument("--block-kb", type=positive_int, default=64, help="KV block size in KiB (default 64)")
    b.add_argument("--mix", default=format_mix(DEFAULT_MIX), help="class shares in percent (default %(default)s)")
    b.add_argument("--swap", default="zram", help=f"swap backend: {', '.join(BACKENDS)} (default zram)")
    b.add_argument("--pressure", type=percent, default=30.0,
                   help="share of the arena that may not stay resident (default 30)")
    b.add_argument("--pressure-mode", choices=PRESSURE_MODES, default="limit",
                   help="limit: lower the squeezed group's limit; antagonist: a second process allocates PCT%% "
                        "of the arena in that group (default limit)")
    b.add_argument("--reps", type=positive_int, default=3, help="repetitions per variant, alternating (default 3)")
    b.add_argument("--seed", type=int, default=0, help="layout seed of repetition 0 (rep r uses seed+r; default 0)")
    b.add_argument("--mglru", choices=("auto", "on", "off", "both", "keep"), default="auto",
                   help="MGLRU variants where /sys/kernel/mm/lru_gen exists (auto: on and off)")
    b.add_argument("--mglru-min-ttl-ms", type=positive_int, default=None, help="min_ttl_ms in the MGLRU-on variant")
    b.add_argument("--ebpf", action="store_true",
                   help="record reclaim latency histograms with the eBPF track's probes (compiles once per rep)")
    b.add_argument("--no-damos", action="store_true", help="skip the DAMOS variant where DAMON is usable")
    add_json_flag(b)
    add_target_args(b)  # --target guest / ssh://... / --hosts: harness/remote runs this same command there
    b.set_defaults(func=run_bench)
    c = verbs.add_parser("compare", help="judge a stored vm-bench run's decode-critical p99 against its reference "
                                         "again, repetitions paired (kernel_vm/compare.py)")
    c.add_argument("run", help="run id, unique prefix, path or 'latest'")
    c.add_argument("--reference", default=None,
                   help="mapping or variant to judge against (default: the run's own --reference)")
    add_json_flag(c)
    c.set_defaults(func=run_compare)


def run_bench(args: argparse.Namespace) -> int:
    from kernel_vm.arena import check_fits
    from kernel_vm.bench import BenchConfig, bench, validate

    if args.swap not in BACKENDS:
        raise UserError(f"--swap must be one of {', '.join(BACKENDS)}, not {args.swap!r}")
    cfg = BenchConfig(mapping=args.mapping, baseline=args.baseline, arena_mb=args.arena_mb, block_kb=args.block_kb,
                      mix=args.mix, swap=args.swap, pressure_pct=args.pressure, reps=args.reps, seed=args.seed,
                      mglru=args.mglru, mglru_min_ttl_ms=args.mglru_min_ttl_ms, damos=not args.no_damos,
                      pressure_mode=args.pressure_mode, ebpf=args.ebpf, reference=args.reference)
    validate(cfg)
    check_fits(cfg.arena_mb << 20)
    require_root("kvds vm bench")
    run, summary = bench(cfg, on_step=lambda s: None)
    if args.json:
        print(strict_dumps({"run": str(run.path), "summary": summary}, indent=2))
    else:
        print_summary(run.path, summary)
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from harness.emit import emit
    from harness.results import ResultStore
    from kernel_vm.compare import compare_stored

    out = compare_stored(ResultStore().get(args.run), args.reference)
    emit(None, out, args.json, _print_compare)
    return 0


def _print_compare(out: dict[str, Any]) -> None:
    print(f"run {out['source_run']}: decode-critical p{out['q']:g} / {out['reference']}'s, repetitions paired")
    for name, row in out["variants"].items():
        print(f"  {name:<32} {verdict_from_dict(row['verdict'])}  ({row['pairs']} pairs)")


def _est(d: dict[str, Any] | None, fmt: str = "{:.1f}") -> str:
    """"v [lo, hi]", "v (point estimate)" without an interval, "- (reason)" without a value."""
    def ok(x: Any) -> bool:
        return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")

    if not d or not ok(d.get("value")):
        return f"- ({(d or {}).get('reason') or 'no data'})"
    lo, hi = d.get("lo"), d.get("hi")
    if not (ok(lo) and ok(hi)):
        return fmt.format(d["value"]) + " (point estimate)"
    return fmt.format(d["value"]) + f" [{fmt.format(lo)}, {fmt.format(hi)}]"


def print_summary(path: Any, s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    sw = s["swap"]
    console.print(f"vm bench: swap={sw['kind']} ({sw['device']}), pressure={s['pressure_pct']:g}% ({s.get('pressure_mode', 'limit')}), reps={s['reps']}, "
                  f"run {path} (plot: vm-bench.png)")
    for vname, v in s["variants"].items():
        t = Table(title=f"{vname}: per class after the squeeze, re-access in decode order (95% CIs)")
        for col in ("class", "pages", "swapped out (mean)", "dropped", "resident", "major faults/rep",
                    "p50 us", "p99 us"):
            t.add_column(col, justify="right" if col != "class" else "left")
        for cls, c in v["classes"].items():
            maj = c["major_faults"]["per_rep"]
            t.add_row(cls, str(c["pages"]), _est(c["swapped_out_pages"]["mean"]), _est(c["dropped_pages"]["mean"]),
                      _est(c["resident_pages"]["mean"]), f"{sum(maj) / len(maj):.0f}",
                      _est(c["reaccess_us"]["p50"], "{:.2f}"), _est(c["reaccess_us"]["p99"], "{:.1f}"))
        console.print(t)
        console.print(f"  share of swapped-out pages from cold classes ({', '.join(s['cold_classes'])}): "
                      f"{_est(v['reclaim_share_cold']['mean'], '{:.3f}')}; of all evicted (swapped+dropped): "
                      f"{_est(v['eviction_share_cold']['mean'], '{:.3f}')}; of the pages the squeeze itself took: "
                      f"{_est(v['squeeze_share_cold']['mean'], '{:.3f}')}")
        psi = [r.get("psi_memory_us", {}) for r in v["per_rep"]]
        if any(psi):
            line = (f"  memory PSI during squeeze+re-access (system-wide, mean per rep): some "
                    f"{np.mean([p.get('some', 0) for p in psi]) / 1000:.1f} ms, full "
                    f"{np.mean([p.get('full', 0) for p in psi]) / 1000:.1f} ms")
        else:
            line = f"  memory PSI unavailable: {s.get('psi', {}).get('reason', 'no /proc/pressure/memory')}"
        ts = [r["probes"]["taskstats"] for r in v["per_rep"] if "taskstats" in r.get("probes", {})]
        bad = sum(1 for t in ts if "error" in t)
        ts = [t for t in ts if "error" not in t]
        if bad:
            line += f"; taskstats invalid in {bad} rep(s) (see per_rep[].probes.taskstats.error)"
        if ts and all("swapin" in t for t in ts):
            line += (f"; arena process swap-in delay {np.mean([t['swapin']['delay_ns'] for t in ts]) / 1e6:.1f} ms/rep,"
                     f" reclaim delay {np.mean([t['reclaim']['delay_ns'] for t in ts]) / 1e6:.1f} ms (taskstats)")
        console.print(line)
        zs = [r["zswap_after_squeeze"] for r in v["per_rep"] if r.get("zswap_after_squeeze")]
        if zs:
            console.print("  zswap pool right after the squeeze (mean per rep): " + ", ".join(
                f"{k} {np.mean([z.get(k, 0) for z in zs]):.0f}"
                for k in ("stored_pages", "pool_total_size", "written_back_pages", "reject_compress_poor")))
        rc = [r["probes"]["reclaim"] for r in v["per_rep"] if "reclaim" in r.get("probes", {})]
        if rc:
            parts = []
            for role in ("parent", "arena"):
                for kind in ("memcg", "direct"):
                    e = [x.get(role, {}).get(kind) for x in rc]
                    e = [x for x in e if x]
                    if e:
                        n = sum(x["count"] for x in e)
                        parts.append(f"{role} {kind}: {n / len(rc):.0f} reclaims/rep, "
                                     f"{sum(x['pages_reclaimed'] for x in e) / len(rc):.0f} pages/rep, "
                                     f"mean {sum(x['total_ns'] for x in e) / max(1, n) / 1000:.0f} us")
            console.print("  eBPF reclaim: " + ("; ".join(parts) or "no reclaim events from parent or arena"))
    h = s["headline"]
    console.print("[bold]headline[/]: decode-critical pages swapped out: "
                  f"{h['baseline']} {_est(h['baseline_decode_critical_swapped_out']['mean'])} vs "
                  f"{h['intent']} {_est(h['intent_decode_critical_swapped_out']['mean'])}")
    if "baseline_decode_critical_p99_us" in h:
        console.print(f"  decode-critical re-access p99 (us): {h['baseline']} {_est(h['baseline_decode_critical_p99_us'])}"
                      f" vs {h['intent']} {_est(h['intent_decode_critical_p99_us'])}; ratio intent/baseline "
                      f"{_est(h['decode_critical_p99_ratio_intent_over_baseline'], '{:.3f}')}")
    if "intent_damos" in h:
        console.print(f"  {h['intent_damos']}: decode-critical swapped out "
                      f"{_est(h['intent_damos_decode_critical_swapped_out']['mean'])}" +
                      (f", p99 {_est(h['intent_damos_decode_critical_p99_us'])} us"
                       if "intent_damos_decode_critical_p99_us" in h else ""))
    print_comparison(s.get("comparison") or {})
    for key in ("damon", "mglru", "ebpf", "psi", "mm_intent"):
        d = s.get(key, {})
        console.print(f"  {key}: {d.get('status')} - {d.get('reason', '')}")
    print_damon(s.get("damon", {}).get("per_class") or {})
    console.print(f"  timer overhead p50/p99: {s['timer_overhead_ns']['p50']:.0f}/{s['timer_overhead_ns']['p99']:.0f} ns")


def print_comparison(comp: dict[str, Any]) -> None:
    """The guest-lab table: one row per variant (intervals over repetitions), verdicts by interval."""
    if not comp.get("variants") and not comp.get("unavailable"):
        return
    from rich.console import Console
    from rich.table import Table

    ref = comp.get("reference")
    t = Table(title="decode-critical under the same budget and pressure (95% CIs over repetitions)"
                    + (f"; verdicts against {ref}" if ref else ""))
    for col in ("variant", "reps", "decode-critical swapped out", "decode-critical p99 us",
                "cold share of reclaim", "verdict: swapped out = 0", f"verdict: p99 <= {ref or 'reference'}'s"):
        t.add_column(col, justify="left" if col.startswith(("variant", "verdict")) else "right", overflow="fold")
    for name, row in comp.get("variants", {}).items():
        v = row["verdicts"]
        t.add_row(name, str(row["reps"]), _est(row["decode_critical_swapped_out"]["mean"]),
                  _est(row["decode_critical_p99_us"]), _est(row["reclaim_share_cold"], "{:.3f}"),
                  verdict_from_dict(v["decode_critical_swapped_out_zero"]),
                  verdict_from_dict(v.get("decode_critical_p99_no_worse_than_reference")) if name != ref
                  else "(reference)")
    for name, why in comp.get("unavailable", {}).items():
        t.add_row(name, "0", f"unavailable: {why}", "", "", "", "")
    Console(width=200).print(t)
    if comp.get("reference_unavailable"):
        Console(width=200).print(f"  reference unavailable: {comp['reference_unavailable']}")


def print_damon(per_class: dict[str, Any]) -> None:
    """DAMOS per class: the scheme and what it tried / applied (mean per repetition)."""
    if not per_class:
        return
    from rich.console import Console
    from rich.table import Table

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
