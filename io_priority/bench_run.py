"""`kvds io bench`: set up the device, run the variants in alternating repetitions, file the run and return its
typed summary; `--dry-run` (dry_run) returns what a bench would set up and start, changing nothing (cli.py parses
the arguments into one BenchConfig; render.py prints; harness/emit.py for --json)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.results import Filed, ResultStore
from io_priority import device as devmod, device_model, ioload_launch, load_rule, run_common, stalls as stallmod
from io_priority.device import MODEL_PREFIX, Layout, check_block_device, check_file, device_spec
from io_priority.sweep_points import bench_goal, points
from io_priority.summary import BENCH_SCHEMA, DRY_RUN_SCHEMA, BenchPlan, BenchSummary
from io_priority.variant_figures import summarize
from io_priority.variant_runs import Variant, run_variants, standard_variants, with_scheduler, write_samples
from io_priority.workload import RepResult, Workload, ioload_args

SCRATCH, SHM = Path("<scratch>"), Path("<shm>")  # how a dry run shows the paths a run would create


@dataclass(frozen=True)
class BenchConfig:
    workload: Workload
    layout: Layout
    modes: tuple[str, ...] = ("unloaded", "baseline", "separated")
    mapping: str = "ioprio-only"        # the mapping of "separated"
    scheduler: str = "mq-deadline"
    device: str = "loop"                # "loop", a regular file or a free block device (io_priority/device.py)
    destroy_data: bool = False
    reps: int = 3
    trace: bool = True                  # block-layer priorities from tracefs
    ebpf: bool = False                  # the eBPF track's per-class histograms, one session per repetition
    stall_ms: float = stallmod.DEFAULT_STALL_MS
    verbose: bool = False               # print each helper's command line as it starts
    trace_note: str = "recorded (block:block_rq_issue/complete)"  # or why the block layer was not recorded


def run(cfg: BenchConfig) -> Filed[BenchSummary]:
    load0 = list(os.getloadavg())
    dev = devmod.prepare(cfg.device, cfg.layout, cfg.destroy_data)
    sched = with_scheduler(dev, cfg.scheduler)
    variants = standard_variants(list(cfg.modes), cfg.mapping)
    results, order = run_variants(dev, cfg.workload, variants, cfg.reps, cfg.trace, label=sched, ebpf=cfg.ebpf,
                                  echo=run_common.echo_command(cfg.verbose))
    config = run_common.config_of(cfg.workload, dev, sched, cfg.reps, mapping=cfg.mapping, modes=list(cfg.modes),
                                  stall_ms=cfg.stall_ms, loadavg_start=load0, block_trace=cfg.trace_note)
    filed = ResultStore().new_run("io-bench", config)
    run_common.record_commands(filed, run_common.commands_of(results, order))
    write_samples(filed, results)
    modes = summarize(variants, results, cfg.workload.engine, device_name=dev.name,
                      buffered=cfg.workload.spill_kind == "buffered", stall_ms=cfg.stall_ms, order=order)
    summary = BenchSummary(BENCH_SCHEMA, config, [[r, n] for r, n in order], modes,
                           goal=bench_goal(sched, modes, _judged(cfg, sched, variants, modes, results, order)),
                           **run_common.ebpf_note(cfg.ebpf))
    stored = summary.as_dict()  # strict JSON: NaN/inf (too few repetitions) -> null
    filed.write_summary(stored)
    return Filed(filed, BenchSummary.from_json(stored))


def _judged(cfg: BenchConfig, sched: str, variants: list[Variant], modes: dict[str, Any],
            results: dict[str, list[RepResult]], order: list[tuple[int, str]]) -> list[dict[str, Any]] | None:
    """The bench's points judged with the host's load (io_priority/load_rule.py), as a sweep judges its own."""
    if not {"unloaded", "baseline", "separated"} <= set(modes):
        return None

    def quiet_points(sub: dict[str, load_rule.SchedRuns]) -> list[dict[str, Any]]:
        return points({s: {"modes": summarize([v for v in variants if v.label in sr.results], sr.results,
                                              cfg.workload.engine, device_name=None,
                                              buffered=cfg.workload.spill_kind == "buffered",
                                              stall_ms=cfg.stall_ms, order=sr.order)} for s, sr in sub.items()})

    return load_rule.judge_points(points({sched: {"modes": modes}}), {sched: load_rule.SchedRuns(results, order)},
                                  quiet_points)


def dry_run(cfg: BenchConfig) -> Filed[BenchPlan]:
    """What a bench would set up and start, built by the same functions the run uses (standard_variants,
    stats.alternating_order, workload.ioload_args, ioload_launch.command) and changing nothing: no scratch file, no
    loop device, no scheduler change, no ioload built or started. The device is checked as a run checks it (a path a
    run would refuse is refused here too); a loop device to be created is shown as <loop device>, scratch paths as
    <scratch>. Files no run."""
    spec = device_spec(cfg.device)
    if spec == "loop":
        path, kind, backing = "<loop device>", "kvds-loop", f"{SCRATCH}/kv-backing.img"
    elif spec.startswith(MODEL_PREFIX):
        m = device_model.model(spec[len(MODEL_PREFIX):])
        settings = " ".join(f"{k}={v}" for k, v in m.nullb_settings(cfg.layout.total).items())
        path, kind, backing = f"<null_blk device: {settings}>", "model", m.name
    elif os.path.exists(real := os.path.realpath(spec)) and stat.S_ISBLK(os.stat(real).st_mode):
        check_block_device(real, cfg.destroy_data)  # read-only: mounts, swap, holders, signatures
        path, kind, backing = real, "block", None
    else:
        check_file(spec, cfg.destroy_data)
        path, kind, backing = f"<loop device over {spec}>", "user-loop", str(Path(spec).resolve())
    variants = standard_variants(list(cfg.modes), cfg.mapping)
    by_label = {v.label: v for v in variants}
    order = stats.alternating_order(list(by_label), cfg.reps)
    commands = []
    for i, (rep, name) in enumerate(order):
        applied = by_label[name].plan(cfg.workload.engine)
        reader, writer = ioload_args(path, cfg.layout, cfg.workload, applied, 1000 * rep + i, SCRATCH, SHM)
        commands.append({"variant": name, "rep": rep, "reader": ioload_launch.command("reader", reader),
                         **({"writer": ioload_launch.command("writer", writer)} if writer is not None else {})})
    device = {"path": path, "kind": kind, "backing": backing, "kv_bytes": cfg.layout.kv_bytes,
              "spill_bytes": cfg.layout.spill_bytes}
    plan = BenchPlan(DRY_RUN_SCHEMA, device, cfg.scheduler, [[r, n] for r, n in order],
                     {v.label: {"mapping": v.mapping.name if v.mapping else None,
                                "applied": v.plan(cfg.workload.engine).as_dict() if v.mapping else None}
                      for v in variants}, commands)
    return Filed(None, plan)
