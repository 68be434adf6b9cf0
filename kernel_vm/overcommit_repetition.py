"""One repetition of `kvds vm overcommit`: populate, tell the kernel (per mechanism, kernel_vm/overcommit.py), set
the budget below the critical bytes, then re-read the critical tiers nearest deadline first, and the rest.

The parent measures (pagemap after the squeeze, per-page first-touch latencies the arena process times); the arena
process only maps, writes, calls and reads. A limit that cannot be met ends the arena process in the memcg OOM
killer (mlock): the repetition records that, and every critical block counts as late.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness import journal
from harness.mapping import MADVISE_ADVICE
from kernel_vm import bounded_write, measure, mm_intent
from kernel_vm.arena import MLOCK, block_runs
from kernel_vm.arena_process import ArenaProcess
from kernel_vm.overcommit import SPILL, TIERS, Geometry, block_worst
from kernel_vm.placement import create_budget_split, create_placement
from qemu_validation import mm_intent_client as mic

LIMIT_WRITE_BOUND_S = 30.0   # a budget write still running after this is interrupted (bounded_write.py)
VICTIM_EXIT_S = 10.0         # after an interrupted write, how long the OOM victim gets to exit


@dataclass
class OvercommitRep:
    """What one repetition measured; per tier lists are indexed by tier (0 yields first), SPILL last."""
    killed: bool = False                             # the arena process was OOM-killed
    limit_error: str | None = None                   # errno of a limit write that failed
    swapped_pages: list[int] = field(default_factory=list)       # per tier, then spillable: swapped after squeeze
    late_blocks: list[int] = field(default_factory=list)         # per tier: blocks whose slowest page > SLO
    tier_blocks: list[int] = field(default_factory=list)         # per tier: blocks
    latency_ns: list[np.ndarray] = field(default_factory=list)   # per tier: page re-access latencies
    intent_stats: dict[str, int] | None = None       # mm_intent stats delta (mm-intent only)
    kernel_tiers: dict[str, dict[str, int]] | None = None  # mm-intent: the kernel's tier -> pages kept, yielded
    # and demoted in its ranges (debugfs mm_intent/ranges, where the kernel has it)
    oom_kills: int = 0                               # memory.events oom_kill of the arena's group(s)
    limit_write_s: float = 0.0                       # how long setting the budget (the limit write) took
    limit_write_interrupted: bool = False            # the write did not return within LIMIT_WRITE_BOUND_S and
    # was ended by a signal (kernel_vm/bounded_write.py: a memcg OOM loop that never yields)


def _events(group: Any, key: str) -> int:
    try:
        for line in group.get("memory", "memory.events").splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except OSError:
        pass
    return 0


def kernel_tiers(reg: mic.Registry, pid: int) -> dict[str, dict[str, int]] | None:
    """Per tier the kernel gave the process's latency-critical ranges, the pages its reclaim look-ups kept,
    yielded and demoted there (`ranges`: the dump's six fields, then tier, kept, yielded, demoted); None on a
    kernel without the file."""
    f = reg.root / "ranges"
    if not f.exists():
        return None
    return parse_ranges(f.read_text(), pid)


def parse_ranges(text: str, pid: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        f = line.split()
        if len(f) != 10:
            raise ValueError(f"mm_intent ranges line {n} does not have 10 fields: {line!r}")
        if int(f[0]) != pid or not int(f[3], 16) & mic.LATENCY_CRITICAL:
            continue
        t = out.setdefault(f[6], {"ranges": 0, "bytes": 0, "kept": 0, "yielded": 0, "demoted": 0})
        t["ranges"] += 1
        t["bytes"] += int(f[2], 16)
        for k, v in zip(("kept", "yielded", "demoted"), f[7:10]):
            t[k] += int(v)
    return out


def run_once(geo: Geometry, mechanism: str, pressure_pct: float, slo_ns: int, tag: str) -> OvercommitRep:
    out = OvercommitRep()
    tier = geo.block_tier()
    critical = np.flatnonzero(tier != SPILL)
    spill = np.flatnonzero(tier == SPILL)
    out.tier_blocks = [int((tier == t).sum()) for t in range(TIERS)]
    with journal.scoped():
        split = mechanism == "memcg"
        if split:  # one limited parent, the critical child protected by memory.low (kernel_vm/placement.py)
            budget_group, placement = create_budget_split(tag)
        else:
            placement = create_placement(tag)
            budget_group = placement.squeeze
        with ArenaProcess(geo.arena_bytes, geo.block_bytes) as proc:
            # the arena process sits in the group the budget covers, so what it allocates while it runs (copies
            # on write of the parent's pages) competes for the budget under every mechanism alike
            placement.squeeze.add_pid(proc.pid)
            base = placement.usage(budget_group)
            if split:
                proc.populate(spill)
                placement.protect.add_pid(proc.pid)
            proc.populate(critical if split else np.arange(geo.n_blocks))

            registered = mechanism == "mm-intent"
            if registered:
                entries = geo.entries(proc.pid, proc.address, time.monotonic_ns())
                mm_intent.allow_critical_bytes(proc.pid, len(critical) * geo.block_bytes)
                reg = mic.Registry()
                reg.register_all(entries)
                stats0 = mm_intent.reclaim_stats(reg)
            elif mechanism == "mlock":
                proc.call("calls", [[(o, n, MLOCK) for o, n in block_runs(critical, geo.block_bytes)]])
            elif mechanism == "madvise-cold":
                cold = np.flatnonzero((tier != SPILL) & (tier < TIERS // 2))
                proc.call("calls", [[(o, n, MADVISE_ADVICE["MADV_COLD"])
                                     for o, n in block_runs(cold, geo.block_bytes)]])

            budget = geo.budget_bytes(pressure_pct)
            with bounded_write.interrupt_after(LIMIT_WRITE_BOUND_S) as bound:
                try:
                    if split:  # the critical group keeps the whole budget while the spillable one has pages to give
                        placement.protect_low(budget)
                    placement.set_limit(budget_group, base + budget)
                except OSError as exc:
                    out.limit_error = errno.errorcode.get(exc.errno or 0, str(exc))
            out.limit_write_s, out.limit_write_interrupted = bound.seconds, bound.interrupted
            if bound.interrupted:  # the write gave the CPU back; the victim of its OOM kill can now exit
                deadline = time.monotonic() + VICTIM_EXIT_S
                while proc.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
            if placement.version == 2:  # a parent's memory.events counts its children's
                out.oom_kills = _events(budget_group, "oom_kill")
            out.killed = out.oom_kills > 0 or not proc.alive()  # the arena is its group's only task
            if out.killed:
                out.late_blocks = list(out.tier_blocks)
                out.latency_ns = [np.empty(0, dtype=np.int64) for _ in range(TIERS)]
                return out
            res = measure.Residency.of(proc.pid, proc.address, geo.n_blocks * geo.pages_per_block, geo.page_bytes)
            page_tier = np.repeat(tier, geo.pages_per_block)
            out.swapped_pages = [int(res.swapped[page_tier == t].sum()) for t in (*range(TIERS), SPILL)]
            for t in reversed(range(TIERS)):  # nearest deadline (highest tier) first, as decode needs them
                lat = proc.touch(np.flatnonzero(tier == t))
                out.latency_ns.insert(0, lat)
                out.late_blocks.insert(0, int((block_worst(lat, geo.pages_per_block) > slo_ns).sum()))
            proc.touch(spill)
            if registered:
                stats1 = mm_intent.reclaim_stats(reg)
                out.intent_stats = (measure.delta(stats1, stats0) if stats0 is not None and stats1 is not None
                                    else None)
                out.kernel_tiers = kernel_tiers(reg, proc.pid)
                reg.clear(proc.pid)
    return out
