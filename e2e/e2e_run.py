"""`kvds e2e`: the thesis in one table. A serving-trace slice executed on this kernel in the four cells {baseline
policy, kvds's policy} x {no intents, intent mapping}, alternating, paired by repetition, with a spill writer and a
memory hog as other tenants; per cell the measured figures beside the simulator's, then the main effects, the
interaction and the goals' verdicts."""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from harness import knobs
from harness.paths import work_dir
from harness.progress import say
from harness.remote.guest import GUEST_TIMEOUT_S
from harness.results import Filed, ResultStore
from harness.stats import alternating_order
from kv_policy.compare import Capacity
from kv_policy.importers import TraceOptions
from kv_policy.tiers import Tier
from io_priority import ioload_launch
from e2e import cells as cl
from e2e import figures, intents, mm_register, session, stack
from e2e.summary import PLAN_SCHEMA, SCHEMA, E2ePlan, E2eSummary
from e2e.tenants import Intensity, hog_argv, writer_argv


@dataclass(frozen=True)
class E2eConfig:
    trace: TraceOptions
    steps: int                 # decode steps of the slice (its first N)
    block_bytes: int           # every KV block scaled to this size
    baseline: str              # the reference policy (LRU)
    policy: str                # kvds's policy
    mapping: str               # the intent mapping (name or TOML path)
    fast: Tier
    slow: Tier
    cap: Capacity
    reps: int
    work_dir: Path | None
    scheduler: str
    intensity: Intensity
    spill_region_bytes: int
    squeeze_fraction: float    # the squeezed group's memory limit this share of the arena below it
    seed: int = 0
    warmup: int = 1            # unmeasured repetitions of the reference cell before the measured ones

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(trace=self.trace.as_dict(), work_dir=str(self.work_dir) if self.work_dir else None,
                 cap=self.cap.label(), fast=self.fast.__dict__, slow=self.slow.__dict__)
        return d


def _prepare(cfg: E2eConfig) -> tuple[cl.Prepared, list[cl.Cell], stack.Sizes]:
    grid = cl.cells(cfg.baseline, cfg.policy)
    prep = cl.prepare(cfg.trace, cfg.steps, cfg.block_bytes, [cfg.baseline, cfg.policy], cfg.cap, cfg.fast,
                      cfg.slow, cfg.mapping, cfg.seed)
    plans = [w.plan for w in prep.work.values()]
    slot = max(p.slot_bytes for p in plans)
    arena = max(p.arena_slots for p in plans)
    sizes = stack.Sizes(slot, arena, max(p.slow_slots for p in plans), cfg.spill_region_bytes,
                        int(arena * slot * cfg.squeeze_fraction))
    sizes.check()
    return prep, grid, sizes


def _order(grid: list[cl.Cell], reps: int) -> list[list[Any]]:
    return [[r, n] for r, n in alternating_order([c.name for c in grid], reps)]


GUEST_BOOT_S = 300.0        # boot, imports, the plans' simulation and the figures under TCG (about 2 min measured)
GUEST_CELL_STEP_S = 0.1     # one decode step of one cell under TCG + icount (0.045 s measured on average; the
# intent cells' between-step work made some 0.13 s before the registry followed by deltas)
GUEST_REP_S = 20.0          # a repetition's fresh squeeze (the arena faulted) and spill tenant


def guest_seconds(steps: int, reps: int, warmup: int, cells: int = 4) -> float:
    """What `--target guest` must allow this plan (harness/remote/guest.py guest_timeout): the boot and figures, and
    every cell repetition's steps and set-up, at about twice the measured per-step cost."""
    n = reps * cells + warmup
    return GUEST_BOOT_S + n * (steps * GUEST_CELL_STEP_S + GUEST_REP_S)


def dry_run(cfg: E2eConfig) -> Filed[E2ePlan]:
    prep, grid, sizes = _prepare(cfg)
    work = cfg.work_dir or work_dir()
    cmds: list[dict[str, Any]] = [
        {"what": "slow tier backing file", "argv": ["<create>", str(work / "kvds-e2e-<pid>.img"),
                                                    str(sizes.replay_bytes + sizes.spill_bytes)]},
        {"what": "slow tier", "argv": ["losetup", "--direct-io=on", "--find", "--show", "<backing file>"]},
        {"what": "scheduler", "argv": ["<write>", "/sys/block/<loop>/queue/scheduler", cfg.scheduler]},
        {"what": "swap", "argv": ["zramctl/hot_add", "<zram>", str(sizes.arena_bytes + (cfg.intensity.hog_mib << 20)
                                                                    + (64 << 20))]},
        {"what": "swap", "argv": ["mkswap", "-f", "<zram>"]}, {"what": "swap", "argv": ["swapon", "-p", "100",
                                                                                         "<zram>"]},
        {"what": "kvds's own memory group (unlimited)", "argv": ["mkdir", "<memory>/kvds-<pid>-e2e-main", "&&",
                                                                "echo", "<pid>", ">",
                                                                "<memory>/kvds-<pid>-e2e-main/cgroup.procs"]},
        {"what": "per cell repetition: a fresh memory cgroup", "argv": ["mkdir", "<memory>/kvds-<pid>-e2e-r<n>"]},
        {"what": "per cell repetition: a fresh fast tier",
         "argv": ["<arena>", str(sizes.arena_bytes), "pre-faulted by kvds inside kvds-<pid>-e2e-r<n>, where kvds "
                  "stays until the repetition ends (its spill writer is started from kvds-<pid>-e2e-main)"]},
        {"what": "memory hog, in a group of its own (kvds-<pid>-e2e-hog)", "argv": hog_argv(cfg.intensity)},
        {"what": "per cell repetition: memory limit (arena - squeeze)",
         "argv": ["<write>", "<memory>/kvds-<pid>-e2e-r<n>/memory.limit_in_bytes",
                  str(stack.limit_for(sizes))]},
        {"what": "per cell repetition, at its end", "argv": ["echo", "<pid>", ">", "<memory>/kvds-<pid>-e2e-main/"
                                                             "cgroup.procs", "&&", "<write>",
                                                             "<memory>/kvds-<pid>-e2e-r<n>/memory.limit_in_bytes",
                                                             "-1", "&&", "<unmap arena>"]},
        {"what": "spill cap", "argv": ["<write>", "<blkio>/kvds-<pid>-e2e-spill/blkio.throttle.write_bps_device",
                                       f"<loop dev_t> {int(cfg.intensity.spill_mbps * 1e6)}"]},
    ]
    if mm_register.intents_by_code(prep.mapping):
        cmds.append({"what": "mm_intent (intent cells, where the kernel has the registry)",
                     "argv": ["<write>", "/sys/kernel/debug/mm_intent/clear", "<pid>", "&&", "<write>",
                              "/sys/kernel/debug/mm_intent/register", "<pid> <slot range> <class flags> 0 <priority>",
                              "per range, at the end of each step whose slots changed class"]})
    for rep, name in [[-1 - w, grid[0].name] for w in range(cfg.warmup)] + _order(grid, cfg.reps):
        cell = next(c for c in grid if c.name == name)
        args = writer_argv("<loop device>", sizes.replay_bytes, sizes.spill_bytes, cfg.intensity,
                           prep.mapping_of(cell), session.TENANT_SECONDS, Path("<scratch>"), Path("<shm>"), max(rep, 0))
        cmds.append({"what": "spill tenant", "cell": name, "rep": rep,
                     "argv": ioload_launch.command("writer", args)})
    plan = E2ePlan(PLAN_SCHEMA, [c.name for c in grid], _order(grid, cfg.reps), _trace_facts(cfg, prep),
                   {**asdict(sizes), "arena_bytes": sizes.arena_bytes, "replay_bytes": sizes.replay_bytes,
                    "memcg_limit_bytes": stack.limit_for(sizes)},
                   prep.mapping.as_dict(), {p: intents.count(s) for p, s in prep.schedule.items()},
                   asdict(cfg.intensity), cmds, cfg.warmup,
                   max(GUEST_TIMEOUT_S, guest_seconds(cfg.steps, cfg.reps, cfg.warmup, len(grid))))
    return Filed(None, plan)


def _trace_facts(cfg: E2eConfig, prep: cl.Prepared) -> dict[str, Any]:
    f = prep.facts()
    return {"path": str(cfg.trace.resolved()), "format": cfg.trace.kind(), "steps": f["steps"],
            "events": f["events"], "counts": f["counts"], "block_bytes": f["block_bytes"],
            "source_block_bytes": f["source_block_bytes"], "priorities": f["meta"].get("priorities"),
            "requests": f["meta"].get("requests"), "step_us": next(iter(prep.work.values())).step_us}


def mm_intent_reason(prep: cl.Prepared) -> str | None:
    """None when the intent cells register their classes with mm_intent; else why not (the mapping names no
    mm_intent flags, or this kernel has no registry: madvise and ioprio still apply)."""
    if not mm_register.intents_by_code(prep.mapping):
        return f"the mapping {prep.mapping.name} gives no class mm_intent flags"
    return mm_register.unavailable_reason()


def host_load() -> dict[str, Any]:
    """The load average and the other kvds / pytest processes on the host (it is shared)."""
    others = 0
    me = os.getpid()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if p.info["pid"] != me and ("harness.cli" in cmd or "bin/kvds" in cmd or "pytest" in cmd):
            others += 1
    return {"loadavg": list(os.getloadavg()), "other_kvds_or_pytest_processes": others}


def run(cfg: E2eConfig) -> Filed[E2eSummary]:
    t0 = time.monotonic()
    prep, grid, sizes = _prepare(cfg)
    say(f"e2e: plans simulated ({time.monotonic() - t0:.0f} s)")
    load_start = host_load()
    work = cfg.work_dir or work_dir()
    interval_ns = int(next(iter(prep.work.values())).step_us * 1e3)
    mm_why = mm_intent_reason(prep)
    st = stack.build(sizes, work, cfg.scheduler, cfg.intensity, interval_ns)
    say(f"e2e: slow tier {st.device.path}, swap {st.swap}, hog started ({time.monotonic() - t0:.0f} s)")
    scratch = work / f"e2e-{os.getpid()}"
    knobs.create_dir(scratch)
    try:
        warm, records, commands = session.run_cells(prep, grid, cfg.reps, st, cfg.intensity, scratch,
                                                    mm_why is None, cfg.warmup)
    finally:
        hog = st.close()
    load_end = host_load()
    swap_in_us = st.swap_in["swap_in_us"] if st.swap_in.get("valid") else None
    cells = {c.name: figures.cell_figures(prep, c, [r for r in records if r.cell == c.name], swap_in_us)
             for c in grid}
    setup = {"device": st.device.as_dict(), "scheduler": st.scheduler, "swap": st.swap,
             "memcg_limit_bytes": stack.limit_for(sizes), "squeeze_bytes": sizes.squeeze_bytes,
             "squeeze": "per cell repetition: a fresh memory cgroup holding a fresh arena, limited to the arena "
                        "less the squeeze",
             "swap_in_cost": st.swap_in,
             "step_stalls": ("the replay thread's taskstats delays (reclaim, swap-in, block I/O, run queue) around every "
                             "decode step, "
                             "and the OOM guard's waits placed in them (e2e/step_stalls.py)") if st.delays is not None
             else f"not measured: {st.delays_why}",
             "arena_bytes": sizes.arena_bytes, "slot_bytes": sizes.slot_bytes, "mapping": prep.mapping.as_dict(),
             "io_classes": {c.name: {k: str(v) for k, v in prep.io(c).__dict__.items()} for c in grid},
             "mm_intent": "registered in the intent cells" if mm_why is None else f"not registered: {mm_why}"}
    summary = E2eSummary(SCHEMA, cells, figures.effects(cells, grid), figures.goals(cells, grid),
                         _order(grid, cfg.reps), _trace_facts(cfg, prep), setup,
                         {"stated": asdict(cfg.intensity), "hog_measured": hog},
                         {"start": load_start, "end": load_end}, time.monotonic() - t0,
                         [figures.squeeze_row(r) | {"cell": r.cell} for r in warm])
    filed = ResultStore().new_run("e2e", cfg.as_dict())
    filed.write_json("commands", {"commands": commands, "hog": hog_argv(cfg.intensity)})
    for r in records:
        filed.write_samples(f"{_slug(r.cell)}-rep{r.rep}-stall-us", r.stall_us)
        if r.stalls:  # columns STALL_COLUMNS, one row per decode step
            filed.write_samples(f"{_slug(r.cell)}-rep{r.rep}-step-stalls",
                                np.column_stack([r.stalls[k] for k in STALL_COLUMNS]))
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)


STALL_COLUMNS = ("reclaim", "swapin", "blkio", "cpu", "guard_waits")  # us x 4 (NaN: a glitch), count per step


def _slug(name: str) -> str:
    return name.replace(" / ", "-").replace(" ", "-")
