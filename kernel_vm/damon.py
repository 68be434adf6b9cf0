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
        c = doctor.capability(cap, "memory")  # memory first: the other areas cost minutes in the guest
        if not c.ok:
            return Status(False, f"{cap}: {c.reason}")
    nr = (KDAMONDS / "nr_kdamonds").read_text().strip()
    if nr != "0":
        return Status(False, f"{nr} kdamond(s) already configured by someone else; kvds will not rebuild them")
    return Status(True, "DAMON sysfs with vaddr/fvaddr and no other kdamond")


VADDR_ACTIONS = frozenset({"willneed", "cold", "pageout", "hugepage", "nohugepage", "stat"})
"""What the virtual-address operations apply (mm/damon/vaddr.c damon_va_apply_scheme); any other action on
fvaddr is tried but applies nothing."""
PADDR_ACTIONS = frozenset({"pageout", "lru_prio", "lru_deprio", "stat"})
"""What the physical-address operations apply (mm/damon/paddr.c, 6.12)."""
IOMEM = Path("/proc/iomem")


@dataclass(frozen=True)
class ClassScheme:
    """One class's DAMOS scheme: fvaddr over the class's own blocks, or (for paddr-only actions such as
    lru_prio) paddr over system RAM with a memcg filter that keeps only the pages charged to the class's group."""

    cls: str
    action: str
    regions: list[tuple[int, int]]  # [start, end): virtual addresses (fvaddr) or physical (paddr)
    ops: str = "fvaddr"
    memcg_path: str | None = None  # paddr: the cgroup (path from the cgroup2 root) whose pages pass the filter
    scope: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "ops": self.ops, "scope": self.scope, "n_regions": len(self.regions),
                "region_bytes": sum(e - s for s, e in self.regions), "memcg_path": self.memcg_path}


def system_ram() -> tuple[int, int]:
    """The biggest top-level "System RAM" range of /proc/iomem (what DAMON_RECLAIM monitors by default)."""
    best = (0, 0)
    for line in IOMEM.read_text().splitlines():
        if line.startswith(" ") or not line.rstrip().endswith("System RAM"):
            continue
        lo, hi = (int(x, 16) for x in line.split(":")[0].strip().split("-"))
        if hi + 1 - lo > best[1] - best[0]:
            best = (lo, hi + 1)
    if best[1] <= best[0] or best[0] == 0 and best[1] == 1:
        raise Unavailable("DAMON: no readable System RAM range in /proc/iomem (addresses hidden without root)")
    return best


def plan(mapping: Mapping, layout: Layout, address: int,
         memcg_of: dict[str, tuple[str, str]] | None = None) -> tuple[list[ClassScheme], dict[str, str]]:
    """The class -> DAMOS scheme table for an arena mapped at address (adjacent blocks merged), and the classes
    left out with the reason.

    memcg_of: class -> (cgroup path from the cgroup2 root, description of who shares that group), used for
    the paddr-only actions, which cannot be aimed at virtual ranges."""
    out: list[ClassScheme] = []
    left_out: dict[str, str] = {}
    ram: tuple[int, int] | None = None
    for cls in CLASSES:
        action = mapping.for_class(cls).damos_action
        blocks = layout.blocks_of(cls)
        if not action or not blocks.size:
            continue
        if action in VADDR_ACTIONS:
            regions: list[tuple[int, int]] = []
            for b in np.sort(blocks).tolist():
                start = address + b * layout.block_bytes
                if regions and regions[-1][1] == start:
                    regions[-1] = (regions[-1][0], start + layout.block_bytes)
                else:
                    regions.append((start, start + layout.block_bytes))
            out.append(ClassScheme(cls.value, action, regions, "fvaddr", None, "the class's own blocks"))
        elif (action in PADDR_ACTIONS and memcg_of and cls.value in memcg_of
              and doctor.capability("damon.paddr", "memory").ok):
            ram = ram or system_ram()
            path, who = memcg_of[cls.value]
            out.append(ClassScheme(cls.value, action, [ram], "paddr", path,
                                   f"system RAM, memcg filter {path} ({who})"))
        else:
            left_out[cls.value] = (f"{action} is a paddr-only action and the class has no memcg of its own to filter on"
                                   if action in PADDR_ACTIONS else f"DAMOS action {action} unknown to fvaddr/paddr")
    return out, left_out


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

    def stop(self) -> None:
        """Turn the kdamonds off (journaled): the variant measures one DAMOS application, not a live tug of war
        with the squeeze and the re-access."""
        for idx in self.kdamonds.values():
            # not journaled on purpose: start()'s record of this file already restores "off", and a record of
            # this write would replay "on" first (EINVAL once the target process is gone)
            (KDAMONDS / str(idx) / "state").write_text("off")


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
        if sch.ops not in (c0 / "avail_operations").read_text().split():
            raise Unavailable(f"DAMON: the {sch.ops} operations set is not available")
        _w(c0 / "operations", sch.ops)
        attrs = c0 / "monitoring_attrs"
        _w(attrs / "intervals/sample_us", sample_us)
        _w(attrs / "intervals/aggr_us", aggr_us)
        _w(attrs / "nr_regions/max", max(1000, 2 * len(sch.regions)))
        _w(attrs / "nr_regions/min", max(10, len(sch.regions)))
        _w(c0 / "targets/nr_targets", 1)
        t0 = c0 / "targets/0"
        if sch.ops != "paddr":
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
        if sch.memcg_path is not None:
            # 6.12 semantics: a filter drops the pages whose match equals `matching`; N drops every page that is
            # NOT charged to the memcg, so the action reaches only that group's pages
            _w(s0 / "filters/nr_filters", 1)
            f0 = s0 / "filters/0"
            _w(f0 / "type", "memcg")
            _w(f0 / "memcg_path", sch.memcg_path)
            _w(f0 / "matching", "N")
        _w(KDAMONDS / str(idx) / "state", "on")
        run.kdamonds[sch.cls] = idx
    return run


def wait_applied(run: DamonRun, aggr_us: int, intervals: int = 5, timeout_s: float = 60.0) -> dict[str, dict[str, int]]:
    """Let every scheme run for at least a few aggregation intervals and until each one has tried a region (a
    slow guest may need longer); returns the schemes' stats."""
    time.sleep(intervals * aggr_us / 1e6)
    deadline = time.monotonic() + timeout_s
    stats = run.scheme_stats()
    while any(s.get("nr_tried", 0) == 0 for s in stats.values()) and time.monotonic() < deadline:
        time.sleep(aggr_us / 1e6)
        stats = run.scheme_stats()
    return stats


def describe(run: DamonRun | None, st: Status) -> dict[str, Any]:
    if run is None:
        return {"status": "skipped", "reason": st.reason}
    return {"status": "ran", "kdamonds": run.kdamonds}
