"""The three commands' work, from device set-up to the result directory (kept apart from argument parsing)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from harness.results import ResultStore, Run, strict
from io_priority import bench, device as devmod, stalls as stallmod
from io_priority.bench import SCHEMA, Variant
from io_priority.device import Layout
from io_priority.workload import Workload

if TYPE_CHECKING:
    from io_priority import sweep

ENGINE_NOTE = ("ioload (io_priority/ioload.c): psync via pread/pwrite + ioprio_set per thread; io_uring via liburing "
               "with sqe->ioprio per request")


def _config(workload: Workload, dev: devmod.Device, scheduler: str, reps: int, **extra: Any) -> dict[str, Any]:
    """The run's configuration; `loadavg_start` (given by the caller, read before the device was set up) and
    `loadavg_end` bracket the measurement (the environment's own loadavg is read when the run is stored)."""
    return {"engine": workload.engine, "workload": workload.as_dict(), "device": dev.as_dict(),
            "scheduler": scheduler, "reps": reps, "load_generator": ENGINE_NOTE,
            "loadavg_end": list(os.getloadavg()), **extra}


def bench_run(modes: list[str], mapping: str, scheduler: str, workload: Workload, layout: Layout, device: str,
              destroy_data: bool, reps: int, trace: bool, ebpf: bool = False,
              stall_ms: float = stallmod.DEFAULT_STALL_MS) -> tuple[dict[str, Any], Run]:
    load0 = list(os.getloadavg())
    dev = devmod.prepare(device, layout, destroy_data)
    sched = bench.with_scheduler(dev, scheduler)
    variants = bench.standard_variants(modes, mapping)
    results, order = bench.run_variants(dev, workload, variants, reps, trace, label=sched, ebpf=ebpf)
    config = _config(workload, dev, sched, reps, mapping=mapping, modes=modes, stall_ms=stall_ms,
                     loadavg_start=load0)
    run = ResultStore().new_run("io-bench", config)
    bench.write_samples(run, results)
    modes = bench.summarize(variants, results, workload.engine, device_name=dev.name,
                            buffered=workload.spill_kind == "buffered", stall_ms=stall_ms, order=order)
    summary = {"schema": SCHEMA, "config": config, "rep_order": [[r, n] for r, n in order], "modes": modes,
               **_ebpf_note(ebpf)}
    if "unloaded" in modes and "baseline" in modes and "separated" in modes:
        from io_priority import sweep

        # the sweep's goal, judged the same way for this run's separated variant (service-time interference
        # <= 1.5 and spill kept >= 50%, both from their intervals, against a reference that reproduced itself)
        per = {sched: {"modes": modes}}
        pts = sweep.points(per)
        summary["goal"] = sweep.goal_summary(pts, per)
        summary["goal"]["verdicts"] = {p["variant"]: {"status": p["goal"]["status"], "text": p["goal"]["text"],
                                                      "end_to_end": p.get("end_to_end")}
                                       for p in pts if p["variant"] != "baseline"}
    summary = strict(summary)  # NaN/inf (too few repetitions) -> null: strict JSON
    run.write_summary(summary)
    return summary, run


def _ebpf_note(used: bool) -> dict[str, Any]:
    """Whether per-class block-layer histograms from the eBPF track are in this run (ebpf-*.json files)."""
    if used:
        return {"ebpf_histograms": "ebpf-<variant>-rep<k>.json", "ebpf_note": "recorded with ebpf.recorder.session"}
    present = bench.ebpf_session() is not None
    return {"ebpf_histograms": None,
            "ebpf_note": ("available: rerun with --ebpf" if present else "eBPF track not importable here")
            + "; block-layer classes per request come from tracefs block_rq_issue (block_layer keys)"}


def sweep_run(plan: dict[str, list[str]], workload: Workload, layout: Layout, device: str,
              destroy_data: bool, reps: int, trace: bool, grow: "sweep.Grow | None" = None,
              stall_ms: float = stallmod.DEFAULT_STALL_MS) -> tuple[dict[str, Any], Run]:
    """plan: scheduler -> the mappings run as variants under it (beside unloaded and baseline). The first round
    runs every variant `reps` times in ABBA order per scheduler; auto-grow rounds run only the points still wide
    and their unloaded reference (io_priority.sweep.Grow)."""
    from harness.mapping import load_mapping
    from io_priority import sweep

    t0 = time.monotonic()
    load0 = list(os.getloadavg())
    dev = devmod.prepare(device, layout, destroy_data)
    loaded = {m: Variant(m, load_mapping(m)) for ms in plan.values() for m in ms}
    variants = {s: [Variant("unloaded", None), Variant("baseline", load_mapping("none"))] + [loaded[m] for m in ms]
                for s, ms in plan.items()}
    per_sched: dict[str, Any] = {}
    all_results: dict[str, dict[str, list[Any]]] = {s: {v.label: [] for v in vs} for s, vs in variants.items()}
    orders: dict[str, list[tuple[int, str]]] = {s: [] for s in plan}
    rounds: list[dict[str, Any]] = []
    todo: dict[str, tuple[list[Variant], int]] = {s: (variants[s], reps) for s in plan}
    first = {s: 0 for s in plan}  # repetition numbers go on across rounds (the ABBA parity with them)
    while True:
        for sched, (vs, n) in todo.items():
            bench.with_scheduler(dev, sched)
            results, order = bench.run_variants(dev, workload, vs, n, trace, label=sched, first_rep=first[sched])
            for name, rs in results.items():
                all_results[sched][name].extend(rs)
            orders[sched].extend(order)
            first[sched] += n
            per_rep = {v.label: len(all_results[sched][v.label]) for v in variants[sched]}
            per_sched[sched] = {"rep_order": [[r, name] for r, name in orders[sched]], "reps": max(per_rep.values()),
                                "reps_per_variant": per_rep,
                                "modes": bench.summarize(variants[sched], all_results[sched], workload.engine,
                                                         buffered=workload.spill_kind == "buffered",
                                                         stall_ms=stall_ms, order=orders[sched])}
        elapsed = time.monotonic() - t0
        done = sum(len(rs) for by in all_results.values() for rs in by.values())
        step = sweep.grow_step(sweep.points(per_sched), grow, elapsed, done)
        rounds.append({"reps": {s: dict(per_sched[s]["reps_per_variant"]) for s in plan},
                       "elapsed_s": round(elapsed, 1), **step})
        if not step["more"]:
            break
        todo = {s: ([v for v in variants[s] if v.label in names], step["step"]) for s, names in step["more"].items()}
    config = _config(workload, dev, ",".join(plan), max(d["reps"] for d in per_sched.values()),
                     mappings=list(loaded), schedulers=list(plan), plan={s: list(ms) for s, ms in plan.items()},
                     grow=grow.as_dict() if grow else None, rounds=rounds, stall_ms=stall_ms, loadavg_start=load0)
    run = ResultStore().new_run("io-sweep", config)
    for sched, results in all_results.items():
        bench.write_samples(run, results, prefix=f"{sched}--")
    points = sweep.points(per_sched)
    summary = {"schema": sweep.SCHEMA, "config": config, "schedulers": per_sched, "points": points,
               "goal": sweep.goal_summary(points, per_sched), **_ebpf_note(False)}
    summary = strict(summary)  # NaN/inf (too few repetitions) -> null: strict JSON
    run.write_summary(summary)
    sweep.plot(points, run.path / "pareto.png", title=f"kvds io sweep ({workload.engine}, {dev.name})")
    return summary, run


def fio_check_run(scheduler: str, workload: Workload, layout: Layout, device: str, destroy_data: bool,
                  reps: int, uring_ab: bool = False) -> tuple[dict[str, Any], Run]:
    from io_priority import fio

    load0 = list(os.getloadavg())
    dev = devmod.prepare(device, layout, destroy_data)
    sched = bench.with_scheduler(dev, scheduler)
    summary, samples = fio.check(dev, workload, reps, uring_ab)
    config = _config(workload, dev, sched, reps, mode=fio.mode_name(workload), loadavg_start=load0)
    run = ResultStore().new_run("io-fio-check", config)
    for name, arr in samples.items():
        run.write_samples(name, arr)
    summary = {"schema": fio.SCHEMA, "config": config, **summary}
    summary = strict(summary)  # NaN/inf (too few repetitions) -> null: strict JSON
    run.write_summary(summary)
    return summary, run
