"""The host side of the experiment, through the knob journal. Set up once for all cells: the slow tier (a kvds loop
device over a scratch file: the replay's slots, then the spill tenant's region), zram swap so reclaim can take the
fast tier's pages, kvds's own unlimited memory cgroup, the spill tenant's blkio cap, and the spill scheduler's page.
and the memory hog in a group of its own. Set up anew for every cell repetition (Squeeze): the fast tier (the VM
track's arena, pre-faulted) in a fresh memory cgroup limited below it, with kvds itself in that group while the
repetition runs (Squeeze says why).
"""
from __future__ import annotations

import os
import resource
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness import knobs
from harness.errors import Unavailable, UserError
from io_priority.device import Device, Layout
from kernel_vm import swap_backend
from kernel_vm.arena import Arena
from kv_policy.replay.slot_io import SlotIO, fast_tier
from e2e import swapin_cost
from e2e.oom_guard import GuardProcess
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
    squeeze_bytes: int     # how far below the arena the squeezed group's memory limit is set

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
class Squeeze:
    """One repetition's memory pressure: a fresh memory cgroup holding a fresh pre-faulted arena and nothing else,
    limited `squeeze_bytes` below the arena, so reclaim takes arena pages from the start of every repetition and,
    each time the replay reads one back, again. Two squeezes that did not keep acting came before (measured):
    - one group for the whole run with the arena and the hog, limited below its charge at set-up: the charge held
      pages nobody touched again (the hog's interpreter, arena slots the plan left alone), reclaim moved those to swap
      in the first repetition and the touched set then fitted, so later repetitions saw 0-5 swap-ins (runs
      20261202-195046-e2e-vm-f49546, 20261202-183408-e2e-guest-edfa7e--guest);
    - a fresh group per repetition with the arena and the hog, limited below the two: reclaim took the hog's pages,
      which it rewrites every pass, so the hog faulted 200,000 pages per 300-step repetition back in while kvds's
      own swap-ins stayed 0 and a repetition took 3-4x as long.
    The hog is a tenant of the host beside it (Stack.hog), not of this group.
    kvds itself stays in the group while the repetition runs: reclaim for a group counts a mapping's references only
    when the address space's owner is in that group (mm/rmap.c invalid_folio_referenced_vma, mm_match_cgroup), and
    the mm_intent series consults its registry at the same place (folio_referenced_one). With kvds moved back to an
    unlimited group after faulting the arena, as before, the limit's reclaim skipped every mapping of the arena: it
    took pages however recently the replay had read them and never looked the intents up (0 look-ups while it took
    40,000 pages; in the guest lab a memory.reclaim took all 8,192 latency-critical pages of a registered 64 MiB
    mapping with its owner outside the group, 345,596 look-ups and none taken with the owner inside). The cost:
    what the interpreter allocates anew during a repetition is charged to the group too (the summary's
    `beyond_arena` bytes per repetition). And kvds is the group's only process: a charge reclaim cannot meet (a
    small group whose pages the replay keeps young, an O_DIRECT call pinning its buffer) has the group's OOM killer
    kill kvds (the 40-step test on this host, cgroup v1, about 1.5 s into its warm-up). So kvds stays only where
    that cannot happen (Keeper): made unkillable (oom_score_adj -1000, which needs CAP_SYS_RESOURCE; such a charge
    then fails, as it did with the group empty: an O_DIRECT call gets ENOMEM and retries, SlotIO, a fault is
    retried by the kernel), or, on cgroup v1 without that capability (this host's sandbox withholds it from root),
    with the group's OOM killer switched off and a guard that raises the limit a step whenever a fault waits
    (e2e/oom_guard.py; the raises are counted per repetition). Where neither is possible kvds goes back to its own
    group after faulting the arena, as before, and the summary says the limit's reclaim did not see the replay's
    references (`owner_in_group` false per repetition)."""
    memcg: knobs.Cgroup
    limit_file: str
    limit_bytes: int
    arena: Arena
    at_limit: dict[str, int]   # the group's memory figures just after the limit was set (memory_state)
    main: knobs.Cgroup         # where kvds goes back to when the repetition ends
    keeper: Keeper | None      # how kvds stays in the group; None: it could not stay there
    lift_fd: int               # the limit file, opened before kvds entered the group (lift says why)

    @property
    def owner_in_group(self) -> bool:
        """kvds (the arena's address space) sits in the group: its references and intents count in its reclaim."""
        return self.keeper is not None

    def lift(self) -> None:
        """The limit lifted, kvds still in the group: once the replay is done, what kvds reads after it (/proc and
        sysfs files, whose buffers are charged to kvds's group) cannot fail with ENOMEM against a full group. Written
        through a descriptor opened before kvds entered the group: opening a file charges its `struct file` to the
        opener's group, and against a full group whose OOM killer is off that open fails with ENOMEM (seen in CI)."""
        os.pwrite(self.lift_fd, b"-1" if self.limit_file == "memory.limit_in_bytes" else b"max", 0)

    def end(self) -> dict[str, Any]:
        """kvds back to its own group, the limit lifted and the arena unmapped; the group itself stays for the
        journal to remove at exit. Returns how kvds was kept in the group (Keeper.end), {} if it was not."""
        kept: dict[str, Any] = {}
        self.lift()  # first: moving kvds reads /proc
        os.close(self.lift_fd)
        if self.keeper is not None:
            self.main.add_pid(os.getpid())
            kept = self.keeper.end()
        try:
            self.arena.close()
        except BufferError:  # a signal unwound a replay still viewing the arena: the mapping goes with the process
            pass
        return kept


@dataclass
class Stack:
    sizes: Sizes
    device: Device
    scheduler: str
    swap: str
    io: SlotIO
    main: knobs.Cgroup      # kvds's own group between repetitions (plans, figures): never squeezed
    hog: MemoryHog          # in a group of its own, for the whole run
    cap: knobs.Cgroup
    shm: Path
    slack: SlackPage
    swap_in: dict[str, Any] = field(default_factory=dict)  # one swap-in's cost on this swap (e2e/swapin_cost.py)
    delays: Any = None          # the delay-accounting query (ebpf.taskstats.DelayQuery; e2e/step_stalls.py)
    delays_why: str | None = None   # why there is no such query on this host
    squeeze: Squeeze | None = None   # the current repetition's (fresh_squeeze)
    squeezes: int = 0

    @property
    def arena(self) -> Arena:
        assert self.squeeze is not None, "no repetition's squeeze is set up"
        return self.squeeze.arena

    def delays_on(self) -> None:
        """Re-assert delay accounting for the next repetition (delayacct_on says why)."""
        knobs.sysctl(DELAYACCT, 1)

    def fresh_squeeze(self) -> Squeeze:
        """The next repetition's squeeze (Squeeze says why one per repetition)."""
        self.end_squeeze()
        self.squeezes += 1
        self.squeeze = squeeze(f"e2e-r{self.squeezes}", self.sizes, self.main)
        return self.squeeze

    @contextmanager
    def outside_squeeze(self) -> Iterator[None]:
        """kvds in its own group for a moment: a process it starts (a tenant) begins there, not in the squeezed
        group (with cgroup v1 a child would stay in the parent's memory group whatever other hierarchy it joins)."""
        assert self.squeeze is not None, "no repetition's squeeze is set up"
        keeper = self.squeeze.keeper
        if keeper is None:  # kvds is there already
            yield
            return
        self.main.add_pid(os.getpid())
        keeper.leave()  # a child inherits kvds's oom_score_adj
        try:
            yield
        finally:
            self.squeeze.memcg.add_pid(os.getpid())
            keeper.rejoin()

    def end_squeeze(self) -> dict[str, Any]:
        """End the current repetition's squeeze, if any; how kvds was kept in its group (Squeeze.end)."""
        kept = self.squeeze.end() if self.squeeze is not None else {}
        self.squeeze = None
        return kept

    def close(self) -> dict[str, float]:
        """Close what this process holds, end the squeeze and stop the hog (its measured intensity); the journal
        undoes the rest."""
        self.slack.close()
        self.io.close()
        if self.delays is not None:
            self.delays.close()
        self.end_squeeze()
        return self.hog.stop()


def squeeze(name: str, sizes: Sizes, main: knobs.Cgroup) -> Squeeze:
    """A fresh memory group `name` holding kvds and a fresh pre-faulted arena (its pages charged there, and charged
    there again when they come back from swap), limited `sizes.squeeze_bytes` below the arena; kvds stays in it
    until Squeeze.end where a Keeper can keep it there (Squeeze says why), else goes back to `main` at once."""
    memcg = knobs.create_cgroup(name, ("memory",))
    limit_file = "memory.limit_in_bytes" if memcg.version("memory") == 1 else "memory.max"
    keep = keeper(memcg, sizes.slot_bytes)  # a guard starts here, while kvds is still outside the group
    lift_fd = os.open(memcg.path("memory") / limit_file, os.O_WRONLY)  # charged outside the group (Squeeze.lift)
    memcg.add_pid(os.getpid())
    try:
        arena = fast_tier(sizes.arena_slots, sizes.slot_bytes)
        if keep is None:
            main.add_pid(os.getpid())
        limit = limit_for(sizes)
        memcg.set("memory", limit_file, limit)
    except BaseException:
        main.add_pid(os.getpid())
        os.close(lift_fd)
        if keep is not None:
            keep.end()
        raise
    return Squeeze(memcg, limit_file, limit, arena, memory_state(memcg), main, keep, lift_fd)


OOM_UNKILLABLE = -1000
OOM_ADJ = Path("/proc/self/oom_score_adj")


def oom_score_adj(value: int) -> int | None:
    """Set kvds's own oom_score_adj; the value before, or None when this host refuses (lowering it needs
    CAP_SYS_RESOURCE)."""
    before = int(OOM_ADJ.read_text().strip())
    try:
        OOM_ADJ.write_text(str(value))
    except PermissionError:
        return None
    return before


@dataclass
class Keeper:
    """How kvds stays in its squeezed group without the group's OOM killer killing it (Squeeze says why it must):
    "oom_score_adj" (kvds unkillable; `oom_adj` is its value before) or "oom_guard" (cgroup v1: the group's OOM
    killer off and e2e/oom_guard.py raising the limit whenever a fault waits)."""
    how: str
    oom_adj: int | None = None
    guard: GuardProcess | None = None

    def leave(self) -> None:
        """kvds steps out of the group (a child it starts now inherits its oom_score_adj)."""
        if self.oom_adj is not None:
            oom_score_adj(self.oom_adj)

    def rejoin(self) -> None:
        if self.oom_adj is not None:
            oom_score_adj(OOM_UNKILLABLE)

    def end(self) -> dict[str, Any]:
        """Undo what kept kvds there; how it was kept, with the guard's counts (limit raises, bytes)."""
        self.leave()
        return {"kept_by": self.how, **(self.guard.stop() if self.guard is not None else {})}


def keeper(memcg: knobs.Cgroup, step: int) -> Keeper | None:
    """What keeps kvds in `memcg` on this host, tried in this order: kvds unkillable, else (cgroup v1) the group's
    OOM killer off with a guard raising its limit `step` bytes per waiting fault; None when neither works. The OOM
    switch is a value inside a group kvds created (its removal undoes it, harness/knobs/cgroups.py)."""
    adj = oom_score_adj(OOM_UNKILLABLE)
    if adj is not None:
        return Keeper("oom_score_adj", oom_adj=adj)
    if memcg.version("memory") != 1:
        return None
    memcg.set("memory", "memory.oom_control", "1")
    try:
        return Keeper("oom_guard", guard=GuardProcess(memcg.path("memory"), step))
    except OSError:
        memcg.set("memory", "memory.oom_control", "0")  # a fault from outside would wait for nobody
        return None


def limit_for(sizes: Sizes) -> int:
    """The squeezed group's limit: the arena less the squeeze (at least one slot)."""
    return max(sizes.slot_bytes, sizes.arena_bytes - sizes.squeeze_bytes)


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
    swap_in = swapin_cost.measure()  # before the hog and the squeezes: this swap's own cost
    main = knobs.create_cgroup("e2e-main", ("memory",))
    main.add_pid(os.getpid())
    hog = MemoryHog(it, knobs.create_cgroup("e2e-hog", ("memory",)))
    shm = knobs.create_file(Path("/dev/shm") / f"kvds-e2e-slack-{os.getpid()}", 4096)
    delays, why = step_delays()
    return Stack(sizes, device, sched, swap.device, SlotIO(dev, sizes.slot_bytes), main, hog,
                 spill_cap(device.dev_t, it.spill_mbps), shm, SlackPage(shm, interval_ns), swap_in, delays, why)


DELAYACCT = "kernel.task_delayacct"


def step_delays() -> tuple[Any, str | None]:
    """The per-step delay query (e2e/step_stalls.py), with delay accounting switched on through the journal; or
    None and why this host cannot answer (no TASKSTATS family, no CAP_NET_ADMIN). Opened here, outside every
    squeezed group."""
    from ebpf.taskstats import DelayQuery, TaskstatsClient  # the eBPF track's taskstats (a raw genetlink query)

    try:
        knobs.sysctl(DELAYACCT, 1)
    except OSError as exc:
        return None, f"delay accounting cannot be switched on ({exc})"
    try:
        with TaskstatsClient() as client:
            return DelayQuery(client), None
    except Unavailable as exc:
        return None, str(exc)


def delayacct_on() -> bool:
    """Delay accounting is host-wide: another kvds process that found it off switches it off again when it ends,
    so every repetition re-asserts it and checks it at its end."""
    return knobs.read_knob(f"/proc/sys/{DELAYACCT.replace('.', '/')}") == "1"


def _stat(cg: knobs.Cgroup) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in cg.get("memory", "memory.stat").splitlines()
                                   if line.strip())}


def memory_state(cg: knobs.Cgroup) -> dict[str, int]:
    """Where the group's pages are (bytes): resident anonymous (the arena's and the hog's), page cache, swapped
    out, and the charge."""
    s = _stat(cg)
    if cg.version("memory") == 1:
        return {"anon": s.get("rss", 0), "file": s.get("cache", 0), "swap": s.get("swap", 0),
                "charge": int(cg.get("memory", "memory.usage_in_bytes").strip())}
    swap = cg.path("memory") / "memory.swap.current"
    return {"anon": s.get("anon", 0), "file": s.get("file", 0),
            "swap": int(swap.read_text().strip()) if swap.exists() else 0,
            "charge": int(cg.get("memory", "memory.current").strip())}


def beyond_arena(state: dict[str, int], arena_bytes: int) -> dict[str, int]:
    """memory_state with `beyond_arena`: the bytes the group holds (resident, cached or swapped) over the arena's,
    i.e. what kvds's interpreter allocated anew while it sat in the group (Squeeze says why it sits there)."""
    return {**state, "beyond_arena": state["anon"] + state["file"] + state["swap"] - arena_bytes}


RECLAIM_KEYS = ("workingset_refault_anon", "pgscan", "pgsteal", "pgpgout")
"""The squeezed group's reclaim counters (memory.stat): anonymous pages read back after reclaim took them, and
pages scanned / reclaimed (cgroup v2) or charged out (v1 has no pgscan/pgsteal; pgpgout counts the pages that left
the group, which during a repetition is reclaim: nothing there unmaps)."""


@dataclass(frozen=True)
class Counters:
    """Cumulative counters read before and after each cell repetition."""
    read_bytes: int       # the slow tier's device, all readers
    write_bytes: int      # the slow tier's device, all writers (the replay's spills and the spill tenant)
    majfaults: int        # major faults of kvds (all its threads): its arena reads of reclaimed pages (swap-ins)
    failcnt: int          # times the cgroup hit its limit (v1 memory.failcnt, v2 memory.events max)
    reclaim: dict[str, int]   # the squeezed group's RECLAIM_KEYS this kernel has

    def minus(self, before: "Counters") -> dict[str, int]:
        out = {k: getattr(self, k) - getattr(before, k) for k in ("read_bytes", "write_bytes", "majfaults",
                                                                  "failcnt")}
        out.update({k: v - before.reclaim[k] for k, v in self.reclaim.items() if k in before.reclaim})
        return out


def counters(st: Stack) -> Counters:
    assert st.squeeze is not None
    memcg = st.squeeze.memcg
    f = (Path("/sys/block") / Path(st.device.path).name / "stat").read_text().split()
    grp = _stat(memcg)
    try:
        if memcg.version("memory") == 1:
            failcnt = int(memcg.get("memory", "memory.failcnt").strip())
        else:  # v2: the times the group hit memory.max
            events = dict(line.split() for line in memcg.get("memory", "memory.events").splitlines() if line)
            failcnt = int(events.get("max", 0))
    except (OSError, ValueError):
        failcnt = 0
    return Counters(int(f[2]) * 512, int(f[6]) * 512, resource.getrusage(resource.RUSAGE_SELF).ru_majflt, failcnt,
                    {k: grp[k] for k in RECLAIM_KEYS if k in grp})
