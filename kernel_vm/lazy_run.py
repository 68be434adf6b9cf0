"""`kvds vm lazy`: lazy vs eager over a pressure sweep. Every mechanism (a harness/mappings name: madvise-only pages
recompute-ok blocks out with MADV_PAGEOUT, madvise-cold only deactivates them, mm-intent registers them
reclaimable, memcg-protect splits the cgroup) runs one repetition of `kvds vm bench` (kernel_vm/repetition.py) at
every pressure, repetitions in alternating order, repetition r of every cell with layout seed + r (paired).

Pressure 0 writes no limit at all, so what a mechanism writes there is its own doing. Figures and verdicts:
kernel_vm/lazy_summary.py. Every kernel change goes through the knob journal.
"""

from __future__ import annotations

import mmap
from dataclasses import asdict, dataclass

from harness import doctor, environment, journal, progress, stats
from harness.errors import Unavailable, UserError
from harness.mapping import Mapping, load_mapping
from harness.results import Filed, ResultStore
from kernel_vm import mglru, mm_intent, swap_backend
from kernel_vm.arena import check_fits
from kernel_vm.arena_process import ArenaDied
from kernel_vm.bench_run import AREA, SWAP_HEADROOM
from kernel_vm.lazy_summary import SCHEMA, LazyRep, LazySummary, lazy_rep, lazy_rows
from kernel_vm.mix import CLASSES, format_mix, make_layout, parse_mix
from kernel_vm.repetition import run_once, squeeze_limit

GUEST_MIX = "decode-critical=20,prefetch-soon=10,warm=25,cold-spillable=25,recompute-ok=15,done=5"


@dataclass(frozen=True)
class LazyConfig:
    mapping: str = "madvise-only,madvise-cold,memcg-protect,mm-intent"  # the mechanisms, comma-separated
    reference: str = "madvise-only"     # the one the others are judged against
    pressures: str = "0,10,30,50"       # percent of the arena that may not stay resident, comma-separated
    arena_mb: int = 8
    block_kb: int = 64
    mix: str = GUEST_MIX
    reps: int = 3
    seed: int = 0
    mglru: str = "off"                  # off / on where /sys/kernel/mm/lru_gen exists, keep: leave it


def _names(text: str, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise UserError(f"{what} {text!r}: empty or repeated entry")
    return names


def pressures(text: str) -> list[float]:
    """The sweep: percents in [0, 100), each once, in the order given."""
    out = []
    for p in _names(text, "--pressures"):
        try:
            v = float(p)
        except ValueError:
            raise UserError(f"--pressures: {p!r} is not a number") from None
        if not 0 <= v < 100:
            raise UserError(f"--pressures: {p} is not in [0, 100)")
        out.append(v)
    return out


def plan(cfg: LazyConfig) -> tuple[list[str], dict[str, Mapping], list[float]]:
    """Every check that changes nothing (UserError, exit 2): the mappings, the sweep, the geometry."""
    names = _names(cfg.mapping, "--mapping")
    if cfg.reference not in names:
        raise UserError(f"--reference {cfg.reference!r} is not one of --mapping {cfg.mapping!r}")
    if cfg.mglru not in ("off", "on", "keep"):
        raise UserError(f"--mglru must be off, on or keep, not {cfg.mglru!r}")
    mix = parse_mix(cfg.mix)
    if (cfg.block_kb << 10) % mmap.PAGESIZE or cfg.arena_mb << 20 < cfg.block_kb << 10:
        raise UserError(f"--block-kb {cfg.block_kb} must be whole pages and fit --arena-mb {cfg.arena_mb}")
    check_fits(cfg.arena_mb << 20)
    mappings = {n: load_mapping(n) for n in names}
    sweep = pressures(cfg.pressures)
    for r in range(cfg.reps):
        lay = make_layout(cfg.arena_mb << 20, cfg.block_kb << 10, mmap.PAGESIZE, mix, cfg.seed + r)
        for m in mappings.values():
            for p in sweep:
                squeeze_limit(lay, m, p, 0)  # UserError: a pressure that leaves less than the mapping protects
            if mm_intent.uses_mm_intent(m):
                mm_intent.check_fits(m, lay)
    return names, mappings, sweep


def _unavailable(names: list[str], mappings: dict[str, Mapping]) -> dict[str, str]:
    out = {}
    for n in names:
        if mm_intent.uses_mm_intent(mappings[n]) and (why := mm_intent.unavailable_reason(AREA)):
            out[n] = why
    return out


def run(cfg: LazyConfig) -> Filed[LazySummary]:
    names, mappings, sweep = plan(cfg)
    doctor.require("memcg", "pagemap", "swap.zram", area=AREA)
    unavailable = _unavailable(names, mappings)
    if cfg.reference in unavailable:
        raise Unavailable(f"the reference {cfg.reference}: {unavailable[cfg.reference]}")
    running = [n for n in names if n not in unavailable]
    ok, why = mglru.available()
    setting = mglru.Setting(cfg.mglru if ok else "keep")
    mix = parse_mix(cfg.mix)
    lay0 = make_layout(cfg.arena_mb << 20, cfg.block_kb << 10, mmap.PAGESIZE, mix, cfg.seed)
    classes = [c.value for c in CLASSES]
    cells = [f"{n}@{p:g}" for p in sweep for n in running]
    results: dict[tuple[str, float], list[LazyRep | None]] = {(n, p): [] for p in sweep for n in running}
    killed: dict[str, list[str]] = {}
    config = {**asdict(cfg), "mix": format_mix(mix), "cells": cells, "unavailable": unavailable,
              "mglru_setting": setting.name, "mglru_reason": why}
    with journal.session():
        device = swap_backend.set_up("zram", int(lay0.arena_bytes * SWAP_HEADROOM)).device
        filed = ResultStore().new_run("vm-lazy", config)
        order = stats.alternating_order(cells, cfg.reps)
        with progress.progress("vm lazy", total=len(order)) as bar:
            for r, cell in order:
                name, _, pct = cell.rpartition("@")
                p = float(pct)
                bar.update(description=f"rep {r + 1}/{cfg.reps} {cell}")
                written0 = swap_backend.written_bytes(device)
                try:
                    with journal.scoped():
                        mglru.apply(setting)
                        lay = make_layout(cfg.arena_mb << 20, cfg.block_kb << 10, mmap.PAGESIZE, mix, cfg.seed + r)
                        res = run_once(lay, mappings[name], p, f"l{r}-{len(results[(name, p)])}-{name}")
                except ArenaDied as exc:  # OOM-killed under this pressure: a result, recorded, not a crash
                    results[(name, p)].append(None)
                    killed.setdefault(cell, []).append(f"rep {r}: {exc}")
                    bar.advance()
                    continue
                written = swap_backend.written_bytes(device) - written0
                results[(name, p)].append(lazy_rep(res, classes, written, lay0.page_bytes))
                if "decode-critical" in res.latency_ns:
                    filed.write_samples(f"reaccess_ns__{name}@{pct}__decode-critical__rep{r}",
                                        res.latency_ns["decode-critical"])
                bar.advance()
    rows = lazy_rows(results, running, sweep, cfg.reference, lay0.page_bytes)
    summary = LazySummary(schema=SCHEMA, mappings=names, reference=cfg.reference, pressures_pct=sweep,
                          reps=cfg.reps, arena_bytes=lay0.arena_bytes, page_bytes=lay0.page_bytes,
                          class_pages={c.value: n for c, n in lay0.class_pages().items()},
                          rows=[r.as_dict() for r in rows], unavailable=unavailable, killed=killed,
                          clock=environment.clock())
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
