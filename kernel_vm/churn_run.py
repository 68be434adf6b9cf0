"""`kvds vm churn`: keep madvise, mlock and an mm_intent registration current through a decode loop whose blocks
change class every step (kernel_vm/churn.py), and measure the calls and CPU time each takes.

Per repetition and mechanism: a fresh arena process maps and writes the arena (no memory pressure: this measures the
cost of telling the kernel, not its effect), then the step's calls are made for real: madvise / mlock by the arena
process on its own mapping, mm_intent register / clear lines by this process (debugfs is root's) naming the arena's
pid, through one held file descriptor each. CPU time is the calling thread's (CLOCK_THREAD_CPUTIME_ID: user and
system, so the kernel's work for the call is in it). Mechanisms alternate (ABBA) over repetitions.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from harness import environment, journal, progress, stats
from harness.errors import Unavailable, UserError
from harness.results import Filed, ResultStore
from kernel_vm import churn, mm_intent
from kernel_vm.arena import check_fits
from kernel_vm.arena_process import ArenaProcess
from kernel_vm.bench_run import AREA
from kernel_vm.churn_summary import SCHEMA, ChurnRep, ChurnSummary, churn_row
from qemu_validation import mm_intent_client as mic

MECHANISMS = ("madvise", "mlock", "mm-intent")
REFERENCE = "madvise"


@dataclass(frozen=True)
class ChurnConfig:
    mechanisms: str = ",".join(MECHANISMS)
    blocks: int = 4096
    block_kb: int = 4
    requests: int = 64
    batch: int = 8
    steps: int = 400
    lifetime: int = 128                 # decode steps a request lives
    layout: str = "contiguous"
    step_ms: float = 30.0               # decode step time the per-second figures assume
    reps: int = 3
    seed: int = 0

    def workload(self) -> churn.Workload:
        return churn.Workload(self.blocks, self.block_kb << 10, self.requests, self.batch, self.steps,
                              self.lifetime, self.layout, self.seed)


def mechanisms(cfg: ChurnConfig) -> list[str]:
    names = [n.strip() for n in cfg.mechanisms.split(",")]
    bad = [n for n in names if n not in MECHANISMS]
    if bad or not names or len(set(names)) != len(names):
        raise UserError(f"--mechanisms {cfg.mechanisms!r}: each of {', '.join(MECHANISMS)} at most once")
    if REFERENCE not in names:
        raise UserError(f"--mechanisms must include {REFERENCE} (the reference)")
    return names


def plan(cfg: ChurnConfig) -> tuple[list[str], churn.Workload, int]:
    """UserError (exit 2) before any change; returns the mechanisms, the workload and how many ranges one
    mm_intent registration needs (0 when the layout needs more than one address space may hold)."""
    names = mechanisms(cfg)
    w = cfg.workload()
    if (cfg.block_kb << 10) % mic.PAGE_SIZE:
        raise UserError(f"--block-kb {cfg.block_kb} is not a whole number of pages")
    if cfg.step_ms <= 0 or cfg.steps < 2:
        raise UserError("--step-ms must be positive and --steps at least 2")
    w.check()
    check_fits(w.n_blocks * w.block_bytes)
    try:
        ranges = len(churn.intent_entries(w, 0, 1, 0, int(cfg.step_ms * 1e6), 0))
    except UserError:
        ranges = 0
    return names, w, ranges


def _intent_rep(proc: ArenaProcess, w: churn.Workload, step_ns: int, reg: mic.Registry) -> ChurnRep:
    """Rewrite the registration wherever kernel_vm/churn.py says it changed: `clear <pid>` then every range."""
    updates = churn.intent_update_steps(w)
    t0 = time.monotonic_ns()
    plans = [churn.intent_entries(w, t, proc.pid, proc.address, step_ns, t0) if u else [] for t, u in
             enumerate(updates)]
    fd_reg = os.open(reg.root / "register", os.O_WRONLY)
    fd_clear = os.open(reg.root / "clear", os.O_WRONLY)
    calls, cpu, wall = [], [], []
    try:
        clear_line = f"{proc.pid}\n".encode()
        for t, entries in enumerate(plans):
            lines = [e.line().encode() for e in entries]
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            if lines:
                if t:
                    os.write(fd_clear, clear_line)
                for line in lines:
                    os.write(fd_reg, line)
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - w0)
            calls.append(len(lines) + (1 if lines and t else 0))
        left = [e for e in reg.dump() if e.pid == proc.pid]
        if left != plans[max(t for t, u in enumerate(updates) if u)]:
            raise RuntimeError(f"mm_intent dump for pid {proc.pid} does not list the last registration")
        reg.clear(proc.pid)
    finally:
        os.close(fd_reg)
        os.close(fd_clear)
    return ChurnRep(calls, cpu, wall, [])


def _one(name: str, w: churn.Workload, step_ns: int) -> ChurnRep:
    with ArenaProcess(w.n_blocks * w.block_bytes, w.block_bytes) as proc:
        proc.populate(np.arange(w.n_blocks))
        if name == "mm-intent":
            mm_intent.allow_critical_bytes(proc.pid, w.n_blocks * w.block_bytes)
            return _intent_rep(proc, w, step_ns, mic.Registry())
        out = proc.call("calls", churn.binary_steps(w, name))
        return ChurnRep(out["calls"], out["cpu_ns"], out["wall_ns"], out["errors"])


def run(cfg: ChurnConfig) -> Filed[ChurnSummary]:
    names, w, ranges = plan(cfg)
    unavailable: dict[str, str] = {}
    if "mm-intent" in names:
        why = mm_intent.unavailable_reason(AREA)
        if why:
            unavailable["mm-intent"] = why
        elif ranges == 0:
            unavailable["mm-intent"] = (f"the {w.layout} layout needs more than the {mic.MAX_PER_MM} ranges one "
                                        "address space may hold")
    running = [n for n in names if n not in unavailable]
    if not running:
        raise Unavailable("; ".join(f"{n}: {why}" for n, why in unavailable.items()))
    step_ns = int(cfg.step_ms * 1e6)
    results: dict[str, list[ChurnRep]] = {n: [] for n in running}
    with journal.session():
        filed = ResultStore().new_run("vm-churn", {**asdict(cfg), "unavailable": unavailable})
        order = stats.alternating_order(running, cfg.reps)
        with progress.progress("vm churn", total=len(order)) as bar:
            for r, name in order:
                bar.update(description=f"rep {r + 1}/{cfg.reps} {name}")
                with journal.scoped():
                    results[name].append(_one(name, w, step_ns))
                bar.advance()
    for name, reps in results.items():
        for r, rep in enumerate(reps):
            filed.write_samples(f"cpu_ns__{name}__rep{r}", np.asarray(rep.cpu_ns, dtype=np.int64))
            filed.write_samples(f"calls__{name}__rep{r}", np.asarray(rep.calls, dtype=np.int64))
    ref = results.get(REFERENCE)
    rows = [churn_row(n, reps, None if n == REFERENCE else ref, cfg.step_ms) for n, reps in results.items()]
    hot = churn.binary_steps(w, "madvise")
    changing = [sum(length for _, length, _ in step) / w.block_bytes for step in hot[1:]]
    summary = ChurnSummary(
        schema=SCHEMA, workload={**asdict(w), "n_blocks": w.n_blocks}, step_ms=cfg.step_ms, reps=cfg.reps,
        reference=REFERENCE, blocks_changing_per_step=float(np.mean(changing)),
        requests_changing_per_step=float(np.mean(churn.changed_requests(w)[1:])), intent_ranges=ranges,
        rows=[r.as_dict() for r in rows], unavailable=unavailable, clock=environment.clock())
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
