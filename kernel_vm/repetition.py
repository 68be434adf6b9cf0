"""One repetition of `kvds vm bench`: populate the arena, apply the mapping, squeeze, re-access in decode order.

Pressure model (the same resident budget for every mapping, so mappings differ only in *which* pages go):
the arena may keep B = (1 - PCT/100) x arena bytes resident. Pages of "protect" classes sit in an unlimited
group; the limited ("squeeze") group gets limit = its charge before the arena was populated + (B - protected
arena bytes). With the baseline mapping `none` nothing is protected, so the squeezed group holds the whole
arena and its limit is base + B. The limit stays in force while the blocks are re-accessed (the pressure
does not go away because a decode step needs its pages back).

Pressure mode `antagonist`: the limit is set so the squeezed share of the arena just fits (base + arena −
protected), then a second process in the squeezed group allocates and writes PCT/100 x arena bytes and holds
them through the re-access. PCT 0 in limit mode (the no-pressure point of `kvds vm lazy`) writes no limit at all.
The arena's budget is the same as with `limit`, but the kernel may also take the
antagonist's own (younger) pages, as it would from a co-located allocation burst.
"""

from __future__ import annotations

import contextlib
import errno
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from harness import journal
from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import MADVISE_ADVICE, Mapping
from kernel_vm import measure, mm_intent
from kernel_vm.arena_process import ArenaProcess
from kernel_vm.mix import CLASSES, Layout
from kernel_vm.placement import create_placement
from kernel_vm.swap_backend import zswap_enabled, zswap_stats


@dataclass
class RepFacts:
    """What one repetition recorded besides latencies and page counts (summary `variants.<v>.per_rep[]`); a fact
    the repetition did not measure (no protect group, no antagonist, no probe) stays None and is left out of JSON."""
    memcg_version: int | None = None              # 1 or 2
    move_charge_at_immigrate: str | None = None   # v1's setting ("0": charges stay where pages were first faulted)
    protect_charged_bytes: int | None = None      # charged to `protect` while its classes were written
    protect_memory_min: Any = None                # v2 memory.min set on `protect` (Placement.protect_min)
    squeeze_charged_bytes: int | None = None      # charged to `squeeze` while the other classes were written
    protect_arena_bytes: int | None = None        # arena bytes placed in `protect`
    squeeze_arena_bytes: int | None = None        # arena bytes placed in `squeeze`
    populate_s: float | None = None               # writing the arena
    mm_intent: dict[str, Any] | None = None       # what the repetition registered (mm_intent.register) and cleared
    madvise_errors: list[str] | None = None       # madvise calls that failed, with errno
    apply_s: float | None = None                  # registrations + madvise
    damon: dict[str, Any] | None = None           # the DAMOS schemes and their stats (damos variants)
    pressure_mode: str | None = None              # limit or antagonist
    squeeze_limit_bytes: int | None = None        # the limit written to `squeeze`
    squeeze_usage_before_limit: int | None = None  # `squeeze` usage before the limit write
    limit_error: str | None = None                # errno name when the limit write failed
    antagonist_bytes: int | None = None           # antagonist mode: bytes the second process wrote
    antagonist_resident_pages: int | None = None  # antagonist mode: its pages still present
    antagonist_swapped_pages: int | None = None   # antagonist mode: its pages swapped
    squeeze_s: float | None = None                # the limit write (+ antagonist)
    squeeze_usage_after_limit: int | None = None  # `squeeze` usage after the limit write
    protect_usage_after_limit: int | None = None  # `protect` usage after it (0 without a protect group)
    zswap_after_squeeze: dict[str, Any] | None = None  # zswap debugfs counters right after the squeeze
    psi_memory_us: dict[str, Any] | None = None   # system-wide memory PSI delta over squeeze + re-access
    vmstat: dict[str, int] | None = None          # /proc/vmstat delta (global)
    squeeze_limit_hits: int | None = None         # v1 failcnt / v2 memory.events max delta
    squeeze_memcg_stat: dict[str, int] | None = None  # `squeeze` memory.stat after re-access
    probes: dict[str, Any] | None = None          # probe name -> its record, or {"error": ...}

    def probe(self, name: str, record: dict[str, Any]) -> None:
        self.probes = {**(self.probes or {}), name: record}

    def as_dict(self) -> dict[str, Any]:
        """Facts not measured are left out; limit_error is always there (None: the limit write succeeded)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k == "limit_error"}


@dataclass
class RepResult:
    """Everything one repetition measured (latencies per class in ns; counts per class in CLASSES order)."""

    latency_ns: dict[str, np.ndarray] = field(default_factory=dict)
    faults: dict[str, dict[str, int]] = field(default_factory=dict)
    residency: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    facts: RepFacts = field(default_factory=RepFacts)


def protected_classes(mapping: Mapping) -> list[IntentClass]:
    return [c for c in CLASSES if mapping.for_class(c).memcg == "protect"]


def squeeze_limit(layout: Layout, mapping: Mapping, pressure_pct: float, base_bytes: int) -> int:
    budget = int(layout.arena_bytes * (1 - pressure_pct / 100.0))
    protected = sum(layout.class_pages()[c] for c in protected_classes(mapping)) * layout.page_bytes
    if budget - protected <= 0:
        raise UserError(f"--pressure {pressure_pct:g}% leaves {budget >> 20} MiB resident, less than the "
                        f"{protected >> 20} MiB the mapping {mapping.name!r} protects; lower --pressure")
    return base_bytes + budget - protected


def _snapshot(proc: ArenaProcess, layout: Layout) -> dict[str, list[int]]:
    res = measure.Residency.of(proc.pid, proc.address, layout.n_pages, layout.page_bytes)
    return res.by_class(layout.page_class(), len(CLASSES))


PRESSURE_MODES = ("limit", "antagonist")


def run_once(layout: Layout, mapping: Mapping, pressure_pct: float, tag: str,
             probes: list[Any] | None = None,
             damos: Callable[[ArenaProcess, Any], dict[str, Any]] | None = None,
             pressure_mode: str = "limit") -> RepResult:
    """One fresh arena process and fresh cgroups (removed again on return), measured by the parent.

    probes: objects with start(pid)/stop()->dict/name, run around squeeze + re-access (eBPF track).
    damos: called after the madvise phase with the arena process and the placement (DAMOS schemes per class)."""
    out = RepResult()
    probes = probes or []
    with journal.scoped(), contextlib.ExitStack() as stack:
        placement = create_placement(tag)
        out.facts.memcg_version = placement.version
        out.facts.move_charge_at_immigrate = placement.move_charge_at_immigrate()
        protect = set(protected_classes(mapping))
        with ArenaProcess(layout.arena_bytes, layout.block_bytes) as proc:
            if proc.page_bytes != layout.page_bytes:
                raise RuntimeError("page size mismatch between layout and arena process")
            # populate: protect classes first (charged to the unlimited group), then the rest, each in arena
            # order, so the squeezed group's LRU sees the same relative order under every mapping
            protect_blocks = np.flatnonzero(np.isin(layout.block_class, [CLASSES.index(c) for c in protect]))
            squeeze_blocks = np.setdiff1d(np.arange(layout.n_blocks), protect_blocks)
            t = measure.Stopwatch()
            if protect_blocks.size:
                placement.protect.add_pid(proc.pid)
                base_protect = placement.usage(placement.protect)
                proc.populate(protect_blocks)
                out.facts.protect_charged_bytes = placement.usage(placement.protect) - base_protect
                out.facts.protect_memory_min = placement.protect_min(placement.usage(placement.protect))
            placement.squeeze.add_pid(proc.pid)
            base_squeeze = placement.usage(placement.squeeze)
            proc.populate(squeeze_blocks)
            out.facts.squeeze_charged_bytes = placement.usage(placement.squeeze) - base_squeeze
            out.facts.protect_arena_bytes = int(protect_blocks.size) * layout.block_bytes
            out.facts.squeeze_arena_bytes = int(squeeze_blocks.size) * layout.block_bytes
            out.facts.populate_s = t.seconds()
            out.residency["after_populate"] = _snapshot(proc, layout)

            # apply: the mapping's mm_intent registrations, then its madvise per class
            errors: list[str] = []
            t = measure.Stopwatch()
            registered = mm_intent.uses_mm_intent(mapping)
            if registered:
                t_reg = measure.Stopwatch()
                out.facts.mm_intent = mm_intent.register(mapping, layout, proc.pid, proc.address)
                out.facts.mm_intent["register_s"] = t_reg.seconds()
            for cls in CLASSES:
                blocks = layout.blocks_of(cls)
                for name in mapping.for_class(cls).madvise:
                    if blocks.size:
                        errors += proc.madvise(blocks, MADVISE_ADVICE[name])
            out.facts.madvise_errors = errors
            out.facts.apply_s = t.seconds()
            if damos is not None:
                out.facts.damon = damos(proc, placement)
            out.residency["after_apply"] = _snapshot(proc, layout)

            # pressure
            out.facts.pressure_mode = pressure_mode
            no_pressure = pressure_pct == 0 and pressure_mode == "limit"  # no limit at all: nothing is squeezed
            limit = squeeze_limit(layout, mapping, 0.0 if pressure_mode == "antagonist" else pressure_pct,
                                  base_squeeze)
            out.facts.squeeze_limit_bytes = None if no_pressure else limit
            out.facts.squeeze_usage_before_limit = placement.usage(placement.squeeze)
            started = []
            for p in probes:  # optional instruments: a failure is recorded, never fatal to the measurement
                try:
                    p.start(proc.pid)
                    started.append(p)
                except Exception as exc:
                    out.facts.probe(p.name, {"error": f"{type(exc).__name__}: {exc}"})
            psi0, vm0 = measure.psi_memory(), measure.vmstat()
            intent0 = mm_intent.reclaim_stats() if registered else None
            hits0 = placement.limit_hits(placement.squeeze)
            t = measure.Stopwatch()
            try:
                if not no_pressure:
                    placement.set_limit(placement.squeeze, limit)  # limit_error stays None
            except OSError as exc:
                out.facts.limit_error = errno.errorcode.get(exc.errno or 0, str(exc))
            if pressure_mode == "antagonist":
                n = max(1, int(layout.n_blocks * pressure_pct / 100.0))
                ant = stack.enter_context(ArenaProcess(n * layout.block_bytes, layout.block_bytes))
                placement.squeeze.add_pid(ant.pid)
                ant.populate(np.arange(n))
                res = measure.Residency.of(ant.pid, ant.address, n * layout.pages_per_block, layout.page_bytes)
                out.facts.antagonist_bytes = n * layout.block_bytes
                out.facts.antagonist_resident_pages = int(res.present.sum())
                out.facts.antagonist_swapped_pages = int(res.swapped.sum())
            out.facts.squeeze_s = t.seconds()
            out.facts.squeeze_usage_after_limit = placement.usage(placement.squeeze)
            out.facts.protect_usage_after_limit = placement.usage(placement.protect) if protect_blocks.size else 0
            out.residency["after_pressure"] = _snapshot(proc, layout)
            if zswap_enabled():
                out.facts.zswap_after_squeeze = zswap_stats()

            # re-access in decode order, faults per class read around each class's pass
            for cls, blocks in layout.decode_order():
                f0 = measure.faults(proc.pid)
                lat = proc.touch(blocks)
                df = measure.faults(proc.pid) - f0
                out.latency_ns[cls.value] = lat
                out.faults[cls.value] = {"minor": df.minor, "major": df.major}
            out.residency["after_reaccess"] = _snapshot(proc, layout)
            if registered:
                intent1 = mm_intent.reclaim_stats()
                out.facts.mm_intent["reclaim_stats"] = (
                    measure.delta(intent1, intent0) if intent0 is not None and intent1 is not None else None)
                out.facts.mm_intent["left_after_clear"] = mm_intent.clear(proc.pid)
            out.facts.psi_memory_us = measure.delta(measure.psi_memory(), psi0)
            out.facts.vmstat = measure.delta(measure.vmstat(), vm0)
            out.facts.squeeze_limit_hits = placement.limit_hits(placement.squeeze) - hits0
            out.facts.squeeze_memcg_stat = {k: v for k, v in placement.stat(placement.squeeze).items()
                                               if k in ("rss", "anon", "swap", "pgmajfault", "pgpgout",
                                                        "pgscan", "pgsteal", "workingset_refault_anon")}
            for p in started:
                try:
                    out.facts.probe(p.name, p.stop())
                except Exception as exc:
                    out.facts.probe(p.name, {"error": f"{type(exc).__name__}: {exc}"})
    return out
