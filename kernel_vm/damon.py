"""A thin DAMON sysfs layer (damo-style, one module): DAMOS schemes per intent class on the arena.

It only ever drives kdamonds it starts itself, and only when no kdamond exists at all (writing
`nr_kdamonds` rebuilds every kdamond directory, so touching it while someone else's kdamond is configured
would destroy their set-up). Every write goes through the knob journal (whose guard refuses kdamonds kvds
did not start), so restore turns the kdamonds off and puts `nr_kdamonds` back.

Per class: one kdamond with the `fvaddr` operations set (fixed virtual-address regions: exactly the class's
block ranges in the arena process), one scheme whose action is the mapping's `damos_action` and whose
access pattern passes every region (the class, not DAMON's access frequency, decides). One kdamond per
class because a DAMON target is a whole process, and `vaddr` would re-fit its regions to the process's
mappings, mixing the classes again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import doctor, knobs
from harness.errors import Unavailable
from harness.journal import get_journal
from harness.knobs.guards import DAMON_ADMIN, foreign_kdamonds
from harness.mapping import Mapping
from kernel_vm.mix import CLASSES, Layout

KDAMONDS = DAMON_ADMIN / "kdamonds"
U64_MAX = str(2**64 - 1)
U32_MAX = str(2**32 - 1)


@dataclass(frozen=True)
class Status:
    usable: bool
    reason: str


def status() -> Status:
    """Whether kvds may run DAMON here: sysfs present, vaddr ops built in, and no kdamond configured by others."""
    for cap in ("damon.sysfs", "damon.vaddr", "damon.free"):
        c = doctor.capability(cap)
        if not c.ok:
            return Status(False, f"{cap}: {c.reason}")
    nr = (KDAMONDS / "nr_kdamonds").read_text().strip()
    if nr != "0":
        return Status(False, f"{nr} kdamond(s) already configured by someone else; kvds will not rebuild them")
    return Status(True, "DAMON sysfs with vaddr/fvaddr and no other kdamond")


@dataclass(frozen=True)
class ClassScheme:
    cls: str
    action: str
    regions: list[tuple[int, int]]  # absolute [start, end) virtual addresses


def plan(mapping: Mapping, layout: Layout, address: int) -> list[ClassScheme]:
    """The class -> (DAMOS action, regions) table for an arena mapped at address; merges adjacent blocks."""
    out = []
    for cls in CLASSES:
        action = mapping.for_class(cls).damos_action
        blocks = layout.blocks_of(cls)
        if not action or not blocks.size:
            continue
        regions: list[tuple[int, int]] = []
        for b in np.sort(blocks).tolist():
            start = address + b * layout.block_bytes
            if regions and regions[-1][1] == start:
                regions[-1] = (regions[-1][0], start + layout.block_bytes)
            else:
                regions.append((start, start + layout.block_bytes))
        out.append(ClassScheme(cls.value, action, regions))
    return out


@dataclass
class DamonRun:
    """kdamonds kvds started for one arena process (index per class)."""

    kdamonds: dict[str, int] = field(default_factory=dict)

    def scheme_stats(self) -> dict[str, dict[str, int]]:
        out = {}
        for cls, idx in self.kdamonds.items():
            kd = KDAMONDS / str(idx)
            # a read-refresh command, not a state change: the journal has nothing to undo for it
            (kd / "state").write_text("update_schemes_stats")
            stats = kd / "contexts/0/schemes/0/stats"
            out[cls] = {f.name: int(f.read_text().strip()) for f in stats.iterdir() if f.is_file()}
        return out


def _w(path: Path, value: str | int) -> None:
    knobs.write_knob(path, str(value))


def start(pid: int, schemes: list[ClassScheme], aggr_us: int = 100_000, sample_us: int = 5_000) -> DamonRun:
    """Start one kdamond per class scheme on pid; raises Unavailable with the reason where it cannot."""
    st = status()
    if not st.usable:
        raise Unavailable(f"DAMON: {st.reason}")
    if foreign_kdamonds(set()):
        raise Unavailable("DAMON: a kdamond started by someone else is running")
    j = get_journal()
    _w(KDAMONDS / "nr_kdamonds", len(schemes))
    run = DamonRun()
    for idx, sch in enumerate(schemes):
        j.owned_kdamonds.add(idx)
        ctx = KDAMONDS / str(idx) / "contexts"
        _w(ctx / "nr_contexts", 1)
        c0 = ctx / "0"
        if "fvaddr" not in (c0 / "avail_operations").read_text().split():
            raise Unavailable("DAMON: the fvaddr operations set is not available")
        _w(c0 / "operations", "fvaddr")
        attrs = c0 / "monitoring_attrs"
        _w(attrs / "intervals/sample_us", sample_us)
        _w(attrs / "intervals/aggr_us", aggr_us)
        _w(attrs / "nr_regions/max", max(1000, 2 * len(sch.regions)))
        _w(attrs / "nr_regions/min", max(10, len(sch.regions)))
        _w(c0 / "targets/nr_targets", 1)
        t0 = c0 / "targets/0"
        _w(t0 / "pid_target", pid)
        _w(t0 / "regions/nr_regions", len(sch.regions))
        for r, (start_addr, end_addr) in enumerate(sch.regions):
            _w(t0 / f"regions/{r}/start", start_addr)
            _w(t0 / f"regions/{r}/end", end_addr)
        _w(c0 / "schemes/nr_schemes", 1)
        s0 = c0 / "schemes/0"
        _w(s0 / "action", sch.action)
        for knob, hi in (("sz", U64_MAX), ("nr_accesses", U32_MAX), ("age", U32_MAX)):
            _w(s0 / f"access_pattern/{knob}/min", 0)
            _w(s0 / f"access_pattern/{knob}/max", hi)
        _w(KDAMONDS / str(idx) / "state", "on")
        run.kdamonds[sch.cls] = idx
    return run


def wait_applied(run: DamonRun, aggr_us: int, intervals: int = 5) -> dict[str, dict[str, int]]:
    """Let every scheme be applied for a few aggregation intervals; returns the schemes' stats."""
    time.sleep(intervals * aggr_us / 1e6)
    return run.scheme_stats()


def describe(run: DamonRun | None, st: Status) -> dict[str, Any]:
    if run is None:
        return {"status": "skipped", "reason": st.reason}
    return {"status": "ran", "kdamonds": run.kdamonds}
