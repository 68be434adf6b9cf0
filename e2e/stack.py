"""The host side of the experiment, set up once for all cells through the knob journal: the slow tier (a kvds loop
device over a scratch file: the replay's slots, then the spill tenant's region), zram swap so reclaim can take the
fast tier's pages, the fast tier (the VM track's arena, pre-faulted, in a kvds memory cgroup with the hog), the memory
limit squeezed below what the arena and the hog hold, the spill tenant's blkio cap, and the spill scheduler's page.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness import knobs
from harness.errors import UserError
from io_priority.device import Device, Layout
from kernel_vm import swap_backend
from kernel_vm.arena import Arena
from kv_policy.replay.slot_io import SlotIO, fast_tier
from e2e.slack_page import SlackPage
from e2e.tenants import Intensity, MemoryHog, spill_cap

MAX_BACKING = 16 << 30


@dataclass(frozen=True)
class Sizes:
    """What the plans need at peak (every cell shares one set-up)."""
    slot_bytes: int
    arena_slots: int
    slow_slots: int
    spill_bytes: int       # the spill tenant's region after the replay's slots
    squeeze_bytes: int     # how far below the arena + hog charge the memory limit is set

    @property
    def replay_bytes(self) -> int:
        return self.slow_slots * self.slot_bytes

    @property
    def arena_bytes(self) -> int:
        return self.arena_slots * self.slot_bytes

    def check(self) -> None:
        if self.replay_bytes + self.spill_bytes > MAX_BACKING:
            raise UserError(f"the slow tier would need {(self.replay_bytes + self.spill_bytes) >> 20} MiB; "
                            "run fewer steps (--steps) or smaller blocks (--block-kib)")


@dataclass
class Stack:
    sizes: Sizes
    device: Device
    scheduler: str
    swap: str
    memcg: knobs.Cgroup
    limit_file: str
    limit_bytes: int
    arena: Arena
    io: SlotIO
    hog: MemoryHog
    main: knobs.Cgroup      # kvds's own group: its faults on the arena (swap-ins) count there
    cap: knobs.Cgroup
    shm: Path
    slack: SlackPage

    def close(self) -> dict[str, float]:
        """Close what this process holds and stop the hog (its measured intensity); the journal undoes the rest."""
        self.slack.close()
        self.io.close()
        try:
            self.arena.close()
        except BufferError:  # a signal unwound a replay still viewing the arena: the mapping goes with the process
            pass
        return self.hog.stop()


def build(sizes: Sizes, work: Path, scheduler: str, it: Intensity, interval_ns: int) -> Stack:
    sizes.check()
    total = sizes.replay_bytes + sizes.spill_bytes
    backing = knobs.create_file(work / f"kvds-e2e-{os.getpid()}.img", total, fill=b"\xa5")
    dev = knobs.loop_attach(backing, direct_io=True)
    if scheduler != "keep":
        knobs.set_scheduler(dev, scheduler)
    sched = knobs.scheduler_of(dev)
    device = Device(dev, "kvds-loop", str(backing), Layout(kv_bytes=sizes.replay_bytes, spill_bytes=sizes.spill_bytes))
    swap = swap_backend.set_up("zram", sizes.arena_bytes + (it.hog_mib << 20) + (64 << 20))
    memcg = knobs.create_cgroup("e2e", ("memory",))
    limit_file = "memory.limit_in_bytes" if memcg.version("memory") == 1 else "memory.max"
    memcg.add_pid(os.getpid())
    arena = fast_tier(sizes.arena_slots, sizes.slot_bytes)
    hog = MemoryHog(it, memcg)
    # kvds itself leaves the squeezed group once the arena is faulted: the arena's pages stay charged there (and
    # come back there from swap), the interpreter's own allocations go to an unlimited group, so the squeeze is
    # exactly the arena and the hog, the same in every cell
    main = knobs.create_cgroup("e2e-main", ("memory",))
    main.add_pid(os.getpid())
    usage = charge(memcg)
    limit = max(sizes.slot_bytes, usage - sizes.squeeze_bytes)
    memcg.set("memory", limit_file, limit)
    shm = knobs.create_file(Path("/dev/shm") / f"kvds-e2e-slack-{os.getpid()}", 4096)
    return Stack(sizes, device, sched, swap.device, memcg, limit_file, limit, arena, SlotIO(dev, sizes.slot_bytes),
                 hog, main, spill_cap(device.dev_t, it.spill_mbps), shm, SlackPage(shm, interval_ns))


def charge(memcg: knobs.Cgroup) -> int:
    """The group's current charge (bytes)."""
    name = "memory.usage_in_bytes" if memcg.version("memory") == 1 else "memory.current"
    return int(memcg.get("memory", name).strip())


def lift_limit(st: Stack) -> None:
    """After the cells: no squeeze while the figures are computed (the journal puts the group away at exit)."""
    st.memcg.set("memory", st.limit_file, "-1" if st.limit_file == "memory.limit_in_bytes" else "max")


@dataclass(frozen=True)
class Counters:
    """Cumulative counters read before and after each cell repetition."""
    read_bytes: int       # the slow tier's device, all readers
    write_bytes: int      # the slow tier's device, all writers (the replay's spills and the spill tenant)
    majfaults: int        # major faults of kvds (its arena reads) and the hog: swap-ins of reclaimed pages
    failcnt: int          # times the cgroup hit its limit (v1 memory.failcnt, v2 memory.events max)

    def minus(self, before: "Counters") -> dict[str, int]:
        return {k: getattr(self, k) - getattr(before, k) for k in self.__dataclass_fields__}


def counters(st: Stack) -> Counters:
    f = (Path("/sys/block") / Path(st.device.path).name / "stat").read_text().split()
    def majfaults(cg: knobs.Cgroup) -> int:  # a fault counts in the faulting task's group, not the page's
        stat = dict(line.split() for line in cg.get("memory", "memory.stat").splitlines() if line.strip())
        return int(stat.get("pgmajfault", 0))
    try:
        if st.memcg.version("memory") == 1:
            failcnt = int(st.memcg.get("memory", "memory.failcnt").strip())
        else:  # v2: the times the group hit memory.max
            events = dict(line.split() for line in st.memcg.get("memory", "memory.events").splitlines() if line)
            failcnt = int(events.get("max", 0))
    except (OSError, ValueError):
        failcnt = 0
    return Counters(int(f[2]) * 512, int(f[6]) * 512, majfaults(st.memcg) + majfaults(st.main), failcnt)
