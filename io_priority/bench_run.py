"""`kvds io bench`: set up the device, run the variants in alternating repetitions, file the run and return its
typed summary (cli.py parses the arguments into one BenchConfig; render.py prints; harness/emit.py for --json)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from harness.results import Filed, ResultStore
from io_priority import bench, device as devmod, run_common, stalls as stallmod
from io_priority.device import Layout
from io_priority.summary import BENCH_SCHEMA, BenchSummary
from io_priority.workload import Workload


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


def run(cfg: BenchConfig) -> Filed[BenchSummary]:
    load0 = list(os.getloadavg())
    dev = devmod.prepare(cfg.device, cfg.layout, cfg.destroy_data)
    sched = bench.with_scheduler(dev, cfg.scheduler)
    variants = bench.standard_variants(list(cfg.modes), cfg.mapping)
    results, order = bench.run_variants(dev, cfg.workload, variants, cfg.reps, cfg.trace, label=sched,
                                        ebpf=cfg.ebpf, echo=run_common.echo_command(cfg.verbose))
    config = run_common.config_of(cfg.workload, dev, sched, cfg.reps, mapping=cfg.mapping, modes=list(cfg.modes),
                                  stall_ms=cfg.stall_ms, loadavg_start=load0)
    filed = ResultStore().new_run("io-bench", config)
    run_common.record_commands(filed, run_common.commands_of(results, order))
    bench.write_samples(filed, results)
    modes = bench.summarize(variants, results, cfg.workload.engine, device_name=dev.name,
                            buffered=cfg.workload.spill_kind == "buffered", stall_ms=cfg.stall_ms, order=order)
    summary = BenchSummary(BENCH_SCHEMA, config, [[r, n] for r, n in order], modes,
                           goal=_goal(sched, modes), **run_common.ebpf_note(cfg.ebpf))
    stored = summary.as_dict()  # strict JSON: NaN/inf (too few repetitions) -> null
    filed.write_summary(stored)
    return Filed(filed, BenchSummary.from_json(stored))


def _goal(sched: str, modes: dict[str, Any]) -> dict[str, Any] | None:
    """The sweep's goal judged the same way for this run's separated variant (service-time interference <= 1.5
    and spill kept >= 50%, both from their intervals, against a reference that reproduced itself)."""
    if not {"unloaded", "baseline", "separated"} <= set(modes):
        return None
    from io_priority import sweep

    per = {sched: {"modes": modes}}
    pts = sweep.points(per)
    goal = sweep.goal_summary(pts, per)
    goal["verdicts"] = {p["variant"]: {"status": p["goal"]["status"], "text": p["goal"]["text"],
                                       "end_to_end": p.get("end_to_end")}
                        for p in pts if p["variant"] != "baseline"}
    return goal
