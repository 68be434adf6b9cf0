"""`kvds vm bench`: the no-intent baseline against an intent mapping, repetitions alternating, with CIs.

Summary keys are a contract with `kvds report` (documented in kernel_vm/README.md); add keys, never rename.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from harness import doctor, figures, journal, progress, stats
from harness.errors import Unavailable, UserError
from harness.mapping import load_mapping
from harness.results import ResultStore, Run
from kernel_vm import damon, ebpf_bridge, mglru, mm_intent, swap_backend
from kernel_vm.arena import timer_overhead_ns
from kernel_vm.compare import p99_vs_reference
from kernel_vm.mix import CLASSES, format_mix, make_layout, parse_mix, DEFAULT_MIX
from kernel_vm.phases import RepResult, run_once

SCHEMA = "kvds.vm-bench/1"
AREA = "memory"
"""Every capability the bench needs is a memory-area one: asked first (the eBPF and I/O probes cost minutes under
TCG+KASAN)."""
BASELINE = "none"
COLD_CLASSES = ("cold-spillable", "recompute-ok", "done")
"""The classes whose pages *should* pay for pressure; reclaim_share_cold is the share they paid."""
SWAP_HEADROOM = 1.25
CLASS_BOOTSTRAPS = 400
"""Resamples for the per-class CIs (about 10^5 samples each: 1000 took minutes on a loaded 2-CPU host); the
headline's decode-critical figures use the harness default of 1000."""


@dataclass(frozen=True)
class BenchConfig:
    mapping: str = "intent"
    baseline: str = BASELINE
    arena_mb: int = 256
    block_kb: int = 64
    mix: str = format_mix(DEFAULT_MIX)
    swap: str = "zram"
    pressure_pct: float = 30.0
    reps: int = 3
    seed: int = 0
    mglru: str = "auto"
    mglru_min_ttl_ms: int | None = None
    damos: bool = True
    pressure_mode: str = "limit"
    ebpf: bool = False
    reference: str | None = None
    """A mapping of `mapping` the others are judged against (summary `comparison`), e.g. memcg-protect."""


def intent_mappings(cfg: BenchConfig) -> list[str]:
    """`mapping` is one name or a comma-separated list (`madvise-only,memcg-protect,mm-intent`)."""
    names = [n.strip() for n in cfg.mapping.split(",")]
    if not all(names):
        raise UserError(f"--mapping {cfg.mapping!r}: empty mapping name")
    if len(set(names)) != len(names):
        raise UserError(f"--mapping {cfg.mapping!r} names a mapping twice")
    return names


@dataclass(frozen=True)
class Variant:
    name: str
    mapping: str
    mglru: mglru.Setting
    damos: bool = False


def _variants(cfg: BenchConfig, settings: list[mglru.Setting], damon_ok: bool, mappings: list[str]) -> list[Variant]:
    out = []
    for s in settings:
        suffix = f"@{s.label()}" if s.label() else ""
        for m in dict.fromkeys((cfg.baseline, *mappings)):
            out.append(Variant(m + suffix, m, s))
        for m in mappings:
            if damon_ok and cfg.damos and any(load_mapping(m).for_class(c).damos_action for c in CLASSES):
                out.append(Variant(f"{m}+damos{suffix}", m, s, damos=True))
    return out


def unavailable_mappings(mappings: list[str]) -> dict[str, str]:
    """Mappings this kernel cannot apply, with the doctor's reason (a probe in error raises: a kvds bug is never
    'unavailable'). Only mm_intent is gated: the other mechanisms' failures are recorded per repetition."""
    out = {}
    for name in mappings:
        if mm_intent.uses_mm_intent(load_mapping(name)):
            c = doctor.capability("mm_intent", AREA)
            if c.is_error:
                raise doctor.ProbeError(f"mm_intent: {c.reason}")
            if not c.ok:
                out[name] = f"mm_intent is {c.status} on this host: {c.reason}"
    return out


def _us(e: stats.Estimate) -> dict[str, float]:
    d = e.as_dict()
    return {k: (v / 1000.0 if k in ("value", "lo", "hi") else v) for k, v in d.items()}


def summarize_variant(reps: list[RepResult]) -> dict[str, Any]:
    """Per-class figures of one variant over its repetitions (see README: summary keys)."""
    classes: dict[str, Any] = {}
    share_swapped, share_evicted, share_squeeze = [], [], []
    for i, cls in enumerate(CLASSES):
        lat = [r.latency_ns[cls.value] for r in reps if cls.value in r.latency_ns]
        if not lat:
            continue
        pct = stats.rep_percentiles(lat, (50.0, 99.0), n_boot=CLASS_BOOTSTRAPS)
        per = {k: [r.residency["after_pressure"][k][i] for r in reps] for k in ("resident", "swapped", "absent")}
        applied = [r.residency["after_apply"]["swapped"][i] for r in reps]
        taken = [r.residency["after_apply"]["resident"][i] - r.residency["after_pressure"]["resident"][i]
                 for r in reps]
        classes[cls.value] = {
            "pages": int(lat[0].size),
            "reaccess_us": {"p50": _us(pct[50.0]), "p99": _us(pct[99.0])},
            "swapped_out_pages": {"per_rep": per["swapped"], "mean": stats.mean_ci(per["swapped"]).as_dict()},
            "swapped_out_after_apply": {"per_rep": applied, "mean": stats.mean_ci(applied).as_dict()},
            "taken_by_squeeze_pages": {"per_rep": taken, "mean": stats.mean_ci(taken).as_dict()},
            "resident_pages": {"per_rep": per["resident"], "mean": stats.mean_ci(per["resident"]).as_dict()},
            "dropped_pages": {"per_rep": per["absent"], "mean": stats.mean_ci(per["absent"]).as_dict()},
            "major_faults": {"per_rep": [r.faults[cls.value]["major"] for r in reps]},
            "minor_faults": {"per_rep": [r.faults[cls.value]["minor"] for r in reps]},
        }
    cold_idx = [i for i, c in enumerate(CLASSES) if c.value in COLD_CLASSES]
    for r in reps:
        sw = np.array(r.residency["after_pressure"]["swapped"])
        gone = sw + np.array(r.residency["after_pressure"]["absent"])
        share_swapped.append(float(sw[cold_idx].sum() / sw.sum()) if sw.sum() else float("nan"))
        share_evicted.append(float(gone[cold_idx].sum() / gone.sum()) if gone.sum() else float("nan"))
        took = np.array(r.residency["after_apply"]["resident"]) - np.array(r.residency["after_pressure"]["resident"])
        share_squeeze.append(float(took[cold_idx].sum() / took.sum()) if took.sum() > 0 else float("nan"))
    facts = [r.facts for r in reps]
    keep = ("mm_intent", "squeeze_limit_bytes", "squeeze_usage_before_limit", "squeeze_usage_after_limit", "limit_error",
            "squeeze_s", "protect_charged_bytes", "protect_arena_bytes", "squeeze_charged_bytes",
            "squeeze_arena_bytes", "protect_usage_after_limit", "squeeze_limit_hits", "madvise_errors",
            "psi_memory_us", "vmstat", "squeeze_memcg_stat", "probes", "damon", "memcg_version",
            "move_charge_at_immigrate", "pressure_mode", "antagonist_bytes", "antagonist_resident_pages",
            "antagonist_swapped_pages", "zswap_after_squeeze", "protect_memory_min")
    return {
        "classes": classes,
        "reclaim_share_cold": {"per_rep": share_swapped,
                               "mean": stats.mean_ci([x for x in share_swapped if x == x]).as_dict()},
        "eviction_share_cold": {"per_rep": share_evicted,
                                "mean": stats.mean_ci([x for x in share_evicted if x == x]).as_dict()},
        "squeeze_share_cold": {"per_rep": share_squeeze,
                               "mean": stats.mean_ci([x for x in share_squeeze if x == x]).as_dict()},
        "per_rep": [{k: f.get(k) for k in keep if k in f} for f in facts],
    }


def headline(variants: dict[str, list[RepResult]], base: str, intent: str) -> dict[str, Any]:
    """Decode-critical pages lost and decode-critical re-access p99, baseline vs intent."""
    dc = "decode-critical"
    i_dc = CLASSES.index(next(c for c in CLASSES if c.value == dc))
    out: dict[str, Any] = {"baseline": base, "intent": intent}
    for role, name in (("baseline", base), ("intent", intent)):
        reps = variants[name]
        swapped = [r.residency["after_pressure"]["swapped"][i_dc] for r in reps]
        out[f"{role}_decode_critical_swapped_out"] = {"per_rep": swapped, "mean": stats.mean_ci(swapped).as_dict()}
        lat = [r.latency_ns[dc] for r in reps if dc in r.latency_ns]
        if lat:
            out[f"{role}_decode_critical_p99_us"] = _us(stats.rep_percentiles(lat, (99.0,))[99.0])
    a = [r.latency_ns[dc] for r in variants[intent] if dc in r.latency_ns]
    b = [r.latency_ns[dc] for r in variants[base] if dc in r.latency_ns]
    if a and b:
        out["decode_critical_p99_ratio_intent_over_baseline"] = stats.rep_ratio(a, b, 99.0).as_dict()
    return out


def comparison(summ: dict[str, Any], variants: dict[str, list[RepResult]], reference: str | None,
               unavailable: dict[str, str]) -> dict[str, Any]:
    """The guest-lab table: per variant, decode-critical pages swapped out, decode-critical re-access p99 and the
    cold classes' share of reclaim, each with its interval over repetitions; verdicts by interval (harness.stats):
    decode-critical swapped out <= 0, and decode-critical p99 / the reference's p99 <= compare.MARGIN (no worse),
    repetition r paired with the reference's repetition r (kernel_vm/compare.py)."""
    dc = "decode-critical"
    i_dc = [c.value for c in CLASSES].index(dc)
    judged = p99_vs_reference({n: [r.latency_ns.get(dc, np.empty(0)) for r in reps] for n, reps in variants.items()},
                              reference) if reference in variants else {}
    rows: dict[str, Any] = {}
    for name, reps in variants.items():
        swapped = [r.residency["after_pressure"]["swapped"][i_dc] for r in reps]
        sw = stats.mean_ci(swapped, floor=0)
        lat = [r.latency_ns[dc] for r in reps if dc in r.latency_ns]
        row: dict[str, Any] = {
            "reps": len(reps),
            "decode_critical_swapped_out": {"per_rep": swapped, "mean": sw.as_dict()},
            "decode_critical_p99_us": _us(stats.rep_percentiles(lat, (99.0,))[99.0]) if lat else None,
            "reclaim_share_cold": summ[name]["reclaim_share_cold"]["mean"],
            "verdicts": {"decode_critical_swapped_out_zero":
                         stats.judge_at_most(sw, 0, "decode-critical swapped out ").as_dict()},
        }
        if name in judged and judged[name].ratio.n:  # both sides have decode-critical reads
            row["decode_critical_p99_ratio_over_reference"] = judged[name].ratio.as_dict()
            row["verdicts"]["decode_critical_p99_no_worse_than_reference"] = judged[name].verdict.as_dict()
        rows[name] = row
    return {"reference": reference, "variants": rows, "unavailable": unavailable}


def mm_intent_doc(variants: dict[str, list[RepResult]], unavailable: dict[str, str]) -> dict[str, Any]:
    """Whether the kernel's reclaim read the registry in this run: `consumer` (its stats file exists; the
    counters' sum over every registering repetition), `registry only` (intents recorded, nothing reads them),
    `unavailable` (the doctor's reason) or `not used`."""
    facts = [r.facts["mm_intent"] for reps in variants.values() for r in reps if r.facts.get("mm_intent")]
    if not facts:
        if unavailable:
            return {"status": "unavailable", "reason": "; ".join(unavailable.values())}
        return {"status": "not used", "reason": "no mapping registers mm_intent ranges"}
    if all(f.get("reclaim_stats") is not None for f in facts):
        total: dict[str, int] = {}
        for f in facts:
            for k, v in f["reclaim_stats"].items():
                total[k] = total.get(k, 0) + int(v)
        return {"status": "consumer", "reason": "reclaim reads the registry (debugfs mm_intent/stats present)",
                "reclaim_stats_total": total}
    return {"status": "registry only", "reason": "no /sys/kernel/debug/mm_intent/stats: this kernel records the "
            "intents but nothing in reclaim reads them (the series without its reclaim consumer)"}


def _save_samples(run: Run, variants: dict[str, list[RepResult]], overhead: np.ndarray) -> None:
    run.write_samples("timer_overhead_ns", overhead)
    for vname, reps in variants.items():
        for r, res in enumerate(reps):
            for cls, lat in res.latency_ns.items():
                run.write_samples(f"reaccess_ns__{vname}__{cls}__rep{r}", lat)


def bench(cfg: BenchConfig, on_step: Callable[[str], None] = lambda s: None) -> tuple[Run, dict[str, Any]]:
    """Run the comparison on this host; returns the run and its summary."""
    mix = parse_mix(cfg.mix)
    validate(cfg)
    requested = intent_mappings(cfg)
    needs = ["memcg", "pagemap", "zswap" if cfg.swap == "zswap" else f"swap.{cfg.swap}"]
    doctor.require(*needs, area=AREA)
    layout = make_layout(cfg.arena_mb << 20, cfg.block_kb << 10, mmap.PAGESIZE, mix, cfg.seed)
    from kernel_vm.phases import squeeze_limit

    for name in (*requested, cfg.baseline):
        m = load_mapping(name)
        squeeze_limit(layout, m, cfg.pressure_pct, 0)  # UserError if pressure is impossible
        if mm_intent.uses_mm_intent(m):  # UserError before any change if one rep's ranges cannot fit
            for r in range(cfg.reps):
                mm_intent.check_fits(m, make_layout(layout.arena_bytes, layout.block_bytes, layout.page_bytes, mix,
                                                    cfg.seed + r))
    unavailable = unavailable_mappings(requested)
    mappings = [n for n in requested if n not in unavailable]
    if not mappings:
        raise Unavailable("; ".join(f"{n}: {why}" for n, why in unavailable.items()))
    settings, mglru_doc = mglru.settings_for(cfg.mglru, cfg.mglru_min_ttl_ms)
    dstat = damon.status()
    variants = _variants(cfg, settings, dstat.usable, mappings)
    names = [v.name for v in variants]
    config = {**asdict(cfg), "mix": format_mix(mix), "variants": names, "mappings": requested,
              "unavailable_variants": unavailable, "arena_bytes": layout.arena_bytes,
              "block_bytes": layout.block_bytes, "page_bytes": layout.page_bytes, "n_blocks": layout.n_blocks,
              "class_pages": {c.value: n for c, n in layout.class_pages().items()}, "device": None,
              "layout_seeds": [cfg.seed + r for r in range(cfg.reps)],
              "scheduler": None}
    results: dict[str, list[RepResult]] = {n: [] for n in names}
    with journal.session():
        backend = swap_backend.set_up(cfg.swap, int(layout.arena_bytes * SWAP_HEADROOM))
        config["device"] = backend.device
        run = ResultStore().new_run("vm-bench", config)
        zswap0 = swap_backend.zswap_stats() if cfg.swap == "zswap" else {}  # mounts debugfs for the session
        probes, ebpf_doc = ebpf_bridge.probes(cfg.ebpf)
        overhead = timer_overhead_ns()
        by_name = {v.name: v for v in variants}
        order = stats.alternating_order(names, cfg.reps)
        with progress.progress("vm bench", total=len(order)) as bar:
            for r, name in order:
                v = by_name[name]
                bar.update(description=f"rep {r + 1}/{cfg.reps} {name}")
                on_step(f"rep {r + 1}/{cfg.reps}: {name}")
                with journal.scoped():
                    mglru.apply(v.mglru)
                    # repetition r: block -> class layout from seed + r, the same for every variant (paired)
                    rep_layout = make_layout(layout.arena_bytes, layout.block_bytes, layout.page_bytes, mix,
                                             cfg.seed + r)
                    hook = _damos_hook(load_mapping(v.mapping), rep_layout) if v.damos else None
                    results[name].append(run_once(rep_layout, load_mapping(v.mapping), cfg.pressure_pct,
                                                  f"r{r}-{len(results[name])}-{v.mapping}", probes, hook,
                                                  cfg.pressure_mode))
                bar.advance()
        for p in probes:
            p.close()
        zswap1 = swap_backend.zswap_stats() if cfg.swap == "zswap" else {}
        zram = swap_backend.zram_stats(backend.device) if cfg.swap == "zram" else {}
    _save_samples(run, results, overhead)
    ov = stats.percentiles(overhead, (50.0, 99.0))
    summary: dict[str, Any] = {
        "schema": SCHEMA,
        "pid": os.getpid(),
        "mapping": cfg.mapping,
        "mappings": requested,
        "baseline": cfg.baseline,
        "swap": backend.as_dict(),
        "pressure_pct": cfg.pressure_pct,
        "pressure_mode": cfg.pressure_mode,
        "reps": cfg.reps,
        "cold_classes": list(COLD_CLASSES),
        "variants": {n: summarize_variant(reps) for n, reps in results.items()},
        "timer_overhead_ns": {"p50": ov[50.0], "p99": ov[99.0]},
        "damon": {"status": "skipped", "reason": dstat.reason} if not dstat.usable else
                 {"status": "compared" if cfg.damos else "disabled", "reason": dstat.reason},
        "mglru": mglru_doc,
        "ebpf": ebpf_doc,
        "psi": _capability_doc("psi.memory"),
        "zswap": {"before": zswap0, "after": zswap1,
                  "per_class_policy": "needs memcg v2 memory.zswap.max; not applied on v1" } if cfg.swap == "zswap"
                 else {"status": "not used"},
        "zram_mm_stat_at_end": zram,
    }
    first = settings[0].label()
    sfx = f"@{first}" if first else ""
    summary["headline"] = headline(results, cfg.baseline + sfx, mappings[0] + sfx)
    summary["mm_intent"] = mm_intent_doc(results, unavailable)
    ref = cfg.reference + sfx if cfg.reference and cfg.reference in mappings else None
    summary["comparison"] = comparison(summary["variants"], results, ref,
                                       {n + sfx: why for n, why in unavailable.items()})
    if cfg.reference and ref is None:
        summary["comparison"]["reference_unavailable"] = unavailable.get(cfg.reference, "")
    if dstat.usable and cfg.damos:
        summary["damon"]["per_class"] = damon_per_class(results)
        # fvaddr actions go through the kernel's madvise code (mm/damon/vaddr.c damos_madvise), which
        # CONFIG_ADVISE_SYSCALLS=n compiles out: the schemes then try regions and apply nothing
        summary["damon"]["vaddr_apply"] = _capability_doc("madvise.MADV_PAGEOUT")
        dv = f"{mappings[0]}+damos{sfx}"
        if dv in results:
            hd = headline({dv: results[dv], cfg.baseline + sfx: results[cfg.baseline + sfx]}, cfg.baseline + sfx, dv)
            summary["headline"]["intent_damos"] = dv
            for k in ("decode_critical_swapped_out", "decode_critical_p99_us"):
                if f"intent_{k}" in hd:
                    summary["headline"][f"intent_damos_{k}"] = hd[f"intent_{k}"]
    run.write_summary(summary)
    figures.draw(run, "vm-bench.png", "kernel_vm.plot:plot_summary", summary)
    return run, summary


def _capability_doc(name: str) -> dict[str, str]:
    c = doctor.capability(name, AREA)
    return {"status": "available" if c.ok else "unavailable", "reason": c.reason}


def _memcg_groups(mapping: Any, placement: Any) -> dict[str, tuple[str, str]]:
    """class -> (its placement group's path from the cgroup2 root, the classes sharing it): what a paddr DAMOS
    scheme's memcg filter can aim at (cgroup2 only: DAMON's memcg filter names a v2 path)."""
    from harness.knobs.cgroups import v2_root
    from kernel_vm.phases import protected_classes

    root = v2_root()
    if placement.version != 2 or root is None:
        return {}
    protect = {c.value for c in protected_classes(mapping)}
    members = {"protect": [c.value for c in CLASSES if c.value in protect],
               "squeeze": [c.value for c in CLASSES if c.value not in protect]}
    out = {}
    for cls in CLASSES:
        role = "protect" if cls.value in protect else "squeeze"
        group = getattr(placement, role).path("memory")
        out[cls.value] = ("/" + str(group.relative_to(root)), f"{role} group: {', '.join(members[role])}")
    return out


def _damos_hook(mapping: Any, layout: Any) -> Callable[[Any, Any], dict[str, Any]]:
    """Start DAMOS schemes per class on the arena process after the madvise phase, let each apply, record the
    schemes' stats and stop them (restored with the rep)."""

    def hook(proc: Any, placement: Any) -> dict[str, Any]:
        schemes, left_out = damon.plan(mapping, layout, proc.address, _memcg_groups(mapping, placement))
        run = damon.start(proc.pid, schemes)
        stats = damon.wait_applied(run, 100_000)
        run.stop()
        return {"kdamonds": run.kdamonds, "schemes": {s.cls: s.as_dict() for s in schemes}, "left_out": left_out,
                "stats": stats}

    return hook


def damon_per_class(variants: dict[str, list[RepResult]]) -> dict[str, Any]:
    """Per class over every DAMOS repetition: the scheme (action, ops, scope) and its stats per rep (regions and
    bytes tried / applied, quota exceeds)."""
    out: dict[str, Any] = {}
    for vname, reps in variants.items():
        for r in reps:
            d = r.facts.get("damon") or {}
            for cls, st in (d.get("stats") or {}).items():
                c = out.setdefault(cls, {**d["schemes"][cls], "variants": {}})
                v = c["variants"].setdefault(vname, {k: [] for k in ("nr_tried", "sz_tried", "nr_applied",
                                                                     "sz_applied", "qt_exceeds")})
                for k in v:
                    v[k].append(int(st.get(k, 0)))
            for cls, why in (d.get("left_out") or {}).items():
                out.setdefault(cls, {"left_out": why})
    return out


def validate(cfg: BenchConfig) -> None:
    if cfg.block_kb << 10 < mmap.PAGESIZE or (cfg.block_kb << 10) % mmap.PAGESIZE:
        raise UserError(f"--block-kb {cfg.block_kb} is not a whole number of {mmap.PAGESIZE}-byte pages")
    if cfg.arena_mb << 20 < cfg.block_kb << 10:
        raise UserError("--arena-mb is smaller than one block")
    names = intent_mappings(cfg)
    for name in (*names, cfg.baseline):
        load_mapping(name)  # UserError naming an unknown mapping or a bad field
    if cfg.baseline in names:
        raise UserError(f"--mapping {cfg.baseline!r} is the baseline itself; pick an intent mapping")
    if cfg.reference is not None and cfg.reference not in names:
        raise UserError(f"--reference {cfg.reference!r} is not one of --mapping {cfg.mapping!r}")
