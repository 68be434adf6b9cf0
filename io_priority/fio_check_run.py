"""`kvds io fio-check`: kvds's reader against fio's on one device, alternating, filed with its typed summary
(cli.py builds the FioCheckConfig; render.py prints; the comparison itself is io_priority/fio.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness.results import Filed, ResultStore
from io_priority import device as devmod, fio, run_common
from io_priority.device import Layout
from io_priority.summary import FIO_CHECK_SCHEMA, FioCheckSummary
from io_priority.variant_runs import with_scheduler
from io_priority.workload import Workload


@dataclass(frozen=True)
class FioCheckConfig:
    workload: Workload                  # rate 0: closed loop at QD1; rate N: open loop with workload.wait
    layout: Layout
    scheduler: str = "mq-deadline"
    device: str = "loop"
    destroy_data: bool = False
    reps: int = 3
    uring_ab: bool = False              # io_uring: also ioload's earlier ring set-up / reap sequences
    verbose: bool = False


def run(cfg: FioCheckConfig) -> Filed[FioCheckSummary]:
    load0 = list(os.getloadavg())
    dev = devmod.prepare(cfg.device, cfg.layout, cfg.destroy_data)
    sched = with_scheduler(dev, cfg.scheduler)
    figures, samples, commands = fio.check(dev, cfg.workload, cfg.reps, cfg.uring_ab,
                                           run_common.echo_command(cfg.verbose))
    config = run_common.config_of(cfg.workload, dev, sched, cfg.reps, mode=fio.mode_name(cfg.workload),
                                  loadavg_start=load0)
    filed = ResultStore().new_run("io-fio-check", config)
    run_common.record_commands(filed, commands)
    for name, arr in samples.items():
        filed.write_samples(name, arr)
    summary = FioCheckSummary(schema=FIO_CHECK_SCHEMA, config=config, **figures)
    stored = summary.as_dict()  # strict JSON: NaN/inf (too few repetitions) -> null
    filed.write_summary(stored)
    return Filed(filed, FioCheckSummary.from_json(stored))
