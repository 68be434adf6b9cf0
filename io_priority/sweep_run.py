"""`kvds io sweep`: every (scheduler, mapping) point in alternating repetitions, auto-grown while points are wide,
filed with its typed summary and Pareto plot (cli.py builds the SweepConfig; render.py prints)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from harness.mapping import load_mapping
from harness.results import Filed, ResultStore
from io_priority import bench, device as devmod, run_common, stalls as stallmod, sweep
from io_priority.bench import Variant
from io_priority.device import Layout
from io_priority.summary import SWEEP_SCHEMA, SweepSummary
from io_priority.workload import Workload


@dataclass(frozen=True)
class SweepConfig:
    workload: Workload
    layout: Layout
    plan: dict[str, list[str]] = field(default_factory=lambda: {s: list(ms) for s, ms in sweep.DEFAULT_PLAN.items()})
    device: str = "loop"
    destroy_data: bool = False
    reps: int = sweep.DEFAULT_REPS
    trace: bool = True
    grow: sweep.Grow | None = None      # auto-grow (--until-width, --time-cap); None: one round
    stall_ms: float = stallmod.DEFAULT_STALL_MS
    verbose: bool = False


def run(cfg: SweepConfig) -> Filed[SweepSummary]:
    """plan: scheduler -> the mappings run as variants under it (beside unloaded and baseline). The first round
    runs every variant `reps` times in ABBA order per scheduler; auto-grow rounds run only the points still wide
    and their unloaded reference (io_priority.sweep.Grow)."""
    t0 = time.monotonic()
    load0 = list(os.getloadavg())
    w = cfg.workload
    dev = devmod.prepare(cfg.device, cfg.layout, cfg.destroy_data)
    echo = run_common.echo_command(cfg.verbose)
    loaded = {m: Variant(m, load_mapping(m)) for ms in cfg.plan.values() for m in ms}
    variants = {s: [Variant("unloaded", None), Variant("baseline", load_mapping("none"))] + [loaded[m] for m in ms]
                for s, ms in cfg.plan.items()}
    per_sched: dict[str, Any] = {}
    all_results: dict[str, dict[str, list[Any]]] = {s: {v.label: [] for v in vs} for s, vs in variants.items()}
    orders: dict[str, list[tuple[int, str]]] = {s: [] for s in cfg.plan}
    rounds: list[dict[str, Any]] = []
    todo: dict[str, tuple[list[Variant], int]] = {s: (variants[s], cfg.reps) for s in cfg.plan}
    first = {s: 0 for s in cfg.plan}  # repetition numbers go on across rounds (the ABBA parity with them)
    while True:
        for sched, (vs, n) in todo.items():
            bench.with_scheduler(dev, sched)
            results, order = bench.run_variants(dev, w, vs, n, cfg.trace, label=sched, first_rep=first[sched],
                                                echo=echo)
            for name, rs in results.items():
                all_results[sched][name].extend(rs)
            orders[sched].extend(order)
            first[sched] += n
            per_rep = {v.label: len(all_results[sched][v.label]) for v in variants[sched]}
            per_sched[sched] = {"rep_order": [[r, name] for r, name in orders[sched]], "reps": max(per_rep.values()),
                                "reps_per_variant": per_rep,
                                "modes": bench.summarize(variants[sched], all_results[sched], w.engine,
                                                         buffered=w.spill_kind == "buffered",
                                                         stall_ms=cfg.stall_ms, order=orders[sched])}
        elapsed = time.monotonic() - t0
        done = sum(len(rs) for by in all_results.values() for rs in by.values())
        step = sweep.grow_step(sweep.points(per_sched), cfg.grow, elapsed, done)
        rounds.append({"reps": {s: dict(per_sched[s]["reps_per_variant"]) for s in cfg.plan},
                       "elapsed_s": round(elapsed, 1), **step})
        if not step["more"]:
            break
        todo = {s: ([v for v in variants[s] if v.label in names], step["step"]) for s, names in step["more"].items()}
    config = run_common.config_of(w, dev, ",".join(cfg.plan), max(d["reps"] for d in per_sched.values()),
                                  mappings=list(loaded), schedulers=list(cfg.plan),
                                  plan={s: list(ms) for s, ms in cfg.plan.items()},
                                  grow=cfg.grow.as_dict() if cfg.grow else None, rounds=rounds,
                                  stall_ms=cfg.stall_ms, loadavg_start=load0)
    filed = ResultStore().new_run("io-sweep", config)
    run_common.record_commands(filed, [c for s, results in all_results.items()
                                       for c in run_common.commands_of(results, orders[s], s)])
    for sched, results in all_results.items():
        bench.write_samples(filed, results, prefix=f"{sched}--")
    points = sweep.points(per_sched)
    summary = SweepSummary(SWEEP_SCHEMA, config, per_sched, points, sweep.goal_summary(points, per_sched),
                           **run_common.ebpf_note(False))
    stored = summary.as_dict()  # strict JSON: NaN/inf (too few repetitions) -> null
    filed.write_summary(stored)
    sweep.plot(points, filed.path / "pareto.png", title=f"kvds io sweep ({w.engine}, {dev.name})")
    return Filed(filed, SweepSummary.from_json(stored))
