"""`kvds io bench --dry-run`: what a bench would set up and start, built by the same functions the run uses
(bench.standard_variants, stats.alternating_order, workload.ioload_args, native.command) and changing nothing:
no scratch file, no loop device, no scheduler change, no ioload built or started. The device is checked as a run
checks it (a path that a run would refuse is refused here too); a loop device to be created is shown as
<loop device>, scratch paths as <scratch>."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness import stats
from io_priority import bench, native
from io_priority.bench_run import BenchConfig
from io_priority import device_model
from io_priority.device import MODEL_PREFIX, check_block_device, check_file, device_spec
from io_priority.summary import DRY_RUN_SCHEMA, BenchPlan
from io_priority.workload import ioload_args

SCRATCH, SHM = Path("<scratch>"), Path("<shm>")


def plan(cfg: BenchConfig) -> BenchPlan:
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
    variants = bench.standard_variants(list(cfg.modes), cfg.mapping)
    by_label = {v.label: v for v in variants}
    order = stats.alternating_order(list(by_label), cfg.reps)
    commands = []
    for i, (rep, name) in enumerate(order):
        applied = by_label[name].plan(cfg.workload.engine)
        reader, writer = ioload_args(path, cfg.layout, cfg.workload, applied, 1000 * rep + i, SCRATCH, SHM)
        commands.append({"variant": name, "rep": rep, "reader": native.command("reader", reader),
                         **({"writer": native.command("writer", writer)} if writer is not None else {})})
    device = {"path": path, "kind": kind, "backing": backing, "kv_bytes": cfg.layout.kv_bytes, "spill_bytes": cfg.layout.spill_bytes}
    return BenchPlan(DRY_RUN_SCHEMA, device, cfg.scheduler, [[r, n] for r, n in order],
                     {v.label: {"mapping": v.mapping.name if v.mapping else None,
                                "applied": v.plan(cfg.workload.engine).as_dict() if v.mapping else None}
                      for v in variants}, commands)
