"""`kvds vm bench` from one BenchConfig: validate (every mapping parsed once: `plan`, which the cli's config also
calls, so bad input exits 2 before the root check), check the host, set up swap, run the variants' repetitions in
alternating order (kernel_vm/repetition.py), file the samples, summarise (kernel_vm/summary.py).

Repetition r of every variant uses the layout of seed + r (paired), which is what paired_p99.p99_vs_reference
relies on. Every kernel change goes through the knob journal (restored on exit, error, Ctrl-C).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from harness import deferred_figures, doctor, environment, journal, progress, stats
from harness.errors import Unavailable, UserError
from harness.mapping import Mapping, load_mapping
from harness.results import Filed, ResultStore, Run
from kernel_vm import damon, ebpf_bridge, mglru, mm_intent, swap_backend
from kernel_vm.arena import check_fits, timer_overhead_ns
from kernel_vm.mix import CLASSES, DEFAULT_MIX, Layout, format_mix, make_layout, parse_mix
from kernel_vm.repetition import RepResult, protected_classes, run_once, squeeze_limit
from kernel_vm.summary import (COLD_CLASSES, SCHEMA, BenchSummary, comparison, damon_per_class, headline,
                               mm_intent_doc, summarize_variant)

BASELINE = "none"
SWAP_HEADROOM = 1.25
AREA = "memory"
"""Every capability the bench needs is a memory-area one: asked first (the eBPF and I/O probes cost minutes under
TCG+KASAN)."""


@dataclass(frozen=True)
class BenchConfig:
    mapping: str = "intent"             # one mapping or a comma-separated list
    baseline: str = BASELINE
    arena_mb: int = 256
    block_kb: int = 64
    mix: str = format_mix(DEFAULT_MIX)
    swap: str = "zram"
    pressure_pct: float = 30.0
    reps: int = 3
    seed: int = 0                       # layout seed of repetition 0 (repetition r: seed + r, for every variant)
    mglru: str = "auto"
    mglru_min_ttl_ms: int | None = None
    damos: bool = True
    pressure_mode: str = "limit"
    ebpf: bool = False
    reference: str | None = None        # a mapping of `mapping` the others are judged against (summary comparison)


@dataclass(frozen=True)
class Plan:
    """A validated config: its mappings parsed once, the layout of repetition 0."""
    cfg: BenchConfig
    requested: list[str]                # the --mapping list, in order
    mappings: dict[str, Mapping]        # every requested mapping and the baseline, by name
    mix: dict[Any, float]
    layout: Layout

    def layout_of(self, rep: int) -> Layout:
        """Repetition rep's block -> class layout, the same for every variant (paired)."""
        lay = self.layout
        return make_layout(lay.arena_bytes, lay.block_bytes, lay.page_bytes, self.mix, self.cfg.seed + rep)


@dataclass(frozen=True)
class Variant:
    name: str
    mapping: Mapping
    mglru: mglru.Setting
    damos: bool = False


def intent_mappings(cfg: BenchConfig) -> list[str]:
    """`mapping` is one name or a comma-separated list (`madvise-only,memcg-protect,mm-intent`)."""
    names = [n.strip() for n in cfg.mapping.split(",")]
    if not all(names):
        raise UserError(f"--mapping {cfg.mapping!r}: empty mapping name")
    if len(set(names)) != len(names):
        raise UserError(f"--mapping {cfg.mapping!r} names a mapping twice")
    return names


def plan(cfg: BenchConfig) -> Plan:
    """Every check that needs no privilege and changes nothing; UserError (exit 2) on bad input."""
    mix = parse_mix(cfg.mix)
    if cfg.block_kb << 10 < mmap.PAGESIZE or (cfg.block_kb << 10) % mmap.PAGESIZE:
        raise UserError(f"--block-kb {cfg.block_kb} is not a whole number of {mmap.PAGESIZE}-byte pages")
    if cfg.arena_mb << 20 < cfg.block_kb << 10:
        raise UserError("--arena-mb is smaller than one block")
    check_fits(cfg.arena_mb << 20)  # before the layout: its arrays are as large as the arena's page count
    names = intent_mappings(cfg)
    mappings = {n: load_mapping(n) for n in (*names, cfg.baseline)}  # UserError naming an unknown mapping
    if cfg.baseline in names:
        raise UserError(f"--mapping {cfg.baseline!r} is the baseline itself; pick an intent mapping")
    if cfg.reference is not None and cfg.reference not in names:
        raise UserError(f"--reference {cfg.reference!r} is not one of --mapping {cfg.mapping!r}")
    p = Plan(cfg, names, mappings, mix, make_layout(cfg.arena_mb << 20, cfg.block_kb << 10, mmap.PAGESIZE, mix,
                                                    cfg.seed))
    for m in mappings.values():
        squeeze_limit(p.layout, m, cfg.pressure_pct, 0)  # UserError if the pressure is impossible
        if mm_intent.uses_mm_intent(m):  # UserError before any change if one rep's ranges cannot fit
            for r in range(cfg.reps):
                mm_intent.check_fits(m, p.layout_of(r))
    return p


def unavailable_mappings(p: Plan) -> dict[str, str]:
    """Mappings this kernel cannot apply, with the doctor's reason (a probe in error raises: a kvds bug is never
    'unavailable'). Only mm_intent is gated: the other mechanisms' failures are recorded per repetition."""
    out = {}
    for name in p.requested:
        if mm_intent.uses_mm_intent(p.mappings[name]) and (why := mm_intent.unavailable_reason(AREA)):
            out[name] = why
    return out


def variants_of(p: Plan, settings: list[mglru.Setting], damon_ok: bool, names: list[str]) -> list[Variant]:
    out = []
    for s in settings:
        suffix = f"@{s.label()}" if s.label() else ""
        for m in dict.fromkeys((p.cfg.baseline, *names)):
            out.append(Variant(m + suffix, p.mappings[m], s))
        for m in names:
            if damon_ok and p.cfg.damos and any(p.mappings[m].for_class(c).damos_action for c in CLASSES):
                out.append(Variant(f"{m}+damos{suffix}", p.mappings[m], s, damos=True))
    return out


def _capability_doc(name: str) -> dict[str, str]:
    c = doctor.capability(name, AREA)
    return {"status": "available" if c.ok else "unavailable", "reason": c.reason}


def _save_samples(run: Run, results: dict[str, list[RepResult]], overhead: np.ndarray) -> None:
    run.write_samples("timer_overhead_ns", overhead)
    for vname, reps in results.items():
        for r, res in enumerate(reps):
            for cls, lat in res.latency_ns.items():
                run.write_samples(f"reaccess_ns__{vname}__{cls}__rep{r}", lat)


def run(cfg: BenchConfig) -> Filed[BenchSummary]:
    """Run the comparison on this host; returns the filed run and its summary."""
    p = plan(cfg)
    doctor.require("memcg", "pagemap", "zswap" if cfg.swap == "zswap" else f"swap.{cfg.swap}", area=AREA)
    unavailable = unavailable_mappings(p)
    names = [n for n in p.requested if n not in unavailable]
    if not names:
        raise Unavailable("; ".join(f"{n}: {why}" for n, why in unavailable.items()))
    settings, mglru_doc = mglru.settings_for(cfg.mglru, cfg.mglru_min_ttl_ms)
    dstat = damon.status()
    variants = variants_of(p, settings, dstat.usable, names)
    lay = p.layout
    config = {**asdict(cfg), "mix": format_mix(p.mix), "variants": [v.name for v in variants],
              "mappings": p.requested, "unavailable_variants": unavailable, "arena_bytes": lay.arena_bytes,
              "block_bytes": lay.block_bytes, "page_bytes": lay.page_bytes, "n_blocks": lay.n_blocks,
              "class_pages": {c.value: n for c, n in lay.class_pages().items()}, "device": None,
              "layout_seeds": [cfg.seed + r for r in range(cfg.reps)], "scheduler": None}
    results: dict[str, list[RepResult]] = {v.name: [] for v in variants}
    with journal.session():
        backend = swap_backend.set_up(cfg.swap, int(lay.arena_bytes * SWAP_HEADROOM))
        config["device"] = backend.device
        filed = ResultStore().new_run("vm-bench", config)
        zswap0 = swap_backend.zswap_stats() if cfg.swap == "zswap" else {}  # mounts debugfs for the session
        probes, ebpf_doc = ebpf_bridge.probes(cfg.ebpf)
        overhead = timer_overhead_ns()
        by_name = {v.name: v for v in variants}
        order = stats.alternating_order(list(by_name), cfg.reps)
        with progress.progress("vm bench", total=len(order)) as bar:
            for r, name in order:
                v = by_name[name]
                bar.update(description=f"rep {r + 1}/{cfg.reps} {name}")
                with journal.scoped():
                    mglru.apply(v.mglru)
                    rep_layout = p.layout_of(r)
                    hook = _damos_hook(v.mapping, rep_layout) if v.damos else None
                    results[name].append(run_once(rep_layout, v.mapping, cfg.pressure_pct,
                                                  f"r{r}-{len(results[name])}-{v.mapping.name}", probes, hook,
                                                  cfg.pressure_mode))
                bar.advance()
        for probe in probes:
            probe.close()
        zswap1 = swap_backend.zswap_stats() if cfg.swap == "zswap" else {}
        zram = swap_backend.zram_stats(backend.device) if cfg.swap == "zram" else {}
    _save_samples(filed, results, overhead)
    ov = stats.percentiles(overhead, (50.0, 99.0))
    sfx = f"@{settings[0].label()}" if settings[0].label() else ""
    base, first = cfg.baseline + sfx, names[0] + sfx
    per_variant = {n: summarize_variant(reps) for n, reps in results.items()}
    ref = cfg.reference + sfx if cfg.reference and cfg.reference in names else None
    damos_on = dstat.usable and cfg.damos
    damon_doc: dict[str, Any] = ({"status": "skipped", "reason": dstat.reason} if not dstat.usable else
                                 {"status": "compared" if cfg.damos else "disabled", "reason": dstat.reason})
    if damos_on:
        damon_doc["per_class"] = damon_per_class(results)
        # fvaddr actions go through the kernel's madvise code (mm/damon/vaddr.c damos_madvise), which
        # CONFIG_ADVISE_SYSCALLS=n compiles out: the schemes then try regions and apply nothing
        damon_doc["vaddr_apply"] = _capability_doc("madvise.MADV_PAGEOUT")
    summary = BenchSummary(
        schema=SCHEMA, pid=os.getpid(), mapping=cfg.mapping, mappings=p.requested, baseline=cfg.baseline,
        swap=backend.as_dict(), pressure_pct=cfg.pressure_pct, pressure_mode=cfg.pressure_mode, reps=cfg.reps,
        cold_classes=list(COLD_CLASSES), variants=per_variant,
        timer_overhead_ns={"p50": ov[50.0], "p99": ov[99.0]}, damon=damon_doc, mglru=mglru_doc, ebpf=ebpf_doc,
        psi=_capability_doc("psi.memory"),
        zswap={"before": zswap0, "after": zswap1,
               "per_class_policy": "needs memcg v2 memory.zswap.max; not applied on v1"} if cfg.swap == "zswap"
        else {"status": "not used"},
        zram_mm_stat_at_end=zram,
        headline=headline(results, base, first, f"{names[0]}+damos{sfx}" if damos_on else None),
        mm_intent=mm_intent_doc(results, unavailable),
        clock=environment.clock(),
        comparison=comparison(per_variant, results, ref, {n + sfx: why for n, why in unavailable.items()},
                              unavailable.get(cfg.reference, "") if cfg.reference and ref is None else None))
    doc = summary.as_dict()
    filed.write_summary(doc)
    deferred_figures.draw(filed, "vm-bench.png", "kernel_vm.plot:plot_summary", doc)
    return Filed(filed, summary)


def _memcg_groups(mapping: Mapping, placement: Any) -> dict[str, tuple[str, str]]:
    """class -> (its placement group's path from the cgroup2 root, the classes sharing it): what a paddr DAMOS
    scheme's memcg filter can aim at (cgroup2 only: DAMON's memcg filter names a v2 path)."""
    from harness.knobs.cgroups import v2_root

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


def _damos_hook(mapping: Mapping, layout: Layout) -> Callable[[Any, Any], dict[str, Any]]:
    """Start DAMOS schemes per class on the arena process after the madvise phase, let each apply, record the
    schemes' stats and stop them (restored with the rep)."""

    def hook(proc: Any, placement: Any) -> dict[str, Any]:
        schemes, left_out = damon.plan(mapping, layout, proc.address, _memcg_groups(mapping, placement))
        kd = damon.start(proc.pid, schemes)
        applied = damon.wait_applied(kd, 100_000)
        kd.stop()
        return {"kdamonds": kd.kdamonds, "schemes": {s.cls: s.as_dict() for s in schemes}, "left_out": left_out,
                "stats": applied}

    return hook
