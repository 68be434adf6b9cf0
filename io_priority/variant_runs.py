"""Running the variants: each variant (a label and a mapping) `reps` times in alternating (ABBA) order on one
device, with the scheduler selected and the raw samples filed (variant_figures.py summarises what they give).

A variant is "unloaded" (the reader alone, the reference), "baseline" (reader + spill, mapping `none`) or a mapping
applied to reader + spill ("separated" in a bench; one per mapping in a sweep).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from harness import stats
from harness.knobs import scheduler_of, set_scheduler
from harness.mapping import Mapping, load_mapping
from harness.progress import progress
from io_priority.blocktrace import BlockIssueTrace
from io_priority.device import Device
from io_priority.host_load import LoadMeter
from io_priority.workload import Applied, RepResult, Runner, Workload, applied


@dataclass(frozen=True)
class Variant:
    label: str
    mapping: Mapping | None  # None: the reader alone

    def plan(self, engine: str) -> Applied | None:
        return applied(self.mapping, engine) if self.mapping is not None else None


def standard_variants(modes: list[str], mapping: str) -> list[Variant]:
    table = {"unloaded": lambda: Variant("unloaded", None),
             "baseline": lambda: Variant("baseline", load_mapping("none")),
             "separated": lambda: Variant("separated", load_mapping(mapping))}
    return [table[m]() for m in modes]


def run_variants(device: Device, workload: Workload, variants: list[Variant], reps: int,
                 trace: bool = True, label: str = "",
                 ebpf: bool = False, first_rep: int = 0,
                 echo: Callable[[str, list[str]], None] | None = None,
                 ) -> tuple[dict[str, list[RepResult]], list[tuple[int, str]]]:
    """Every variant `reps` times in ABBA order; returns results per variant and the order actually run.
    ebpf: wrap each repetition in the eBPF track's per-class block-layer histogram session.
    first_rep: continue an earlier call's alternation (the sweep's auto-grow adds repetitions in rounds).
    echo (--verbose): told each ioload command line as it starts."""
    if ebpf:
        from ebpf.recorder import session
    if workload.dirty_background_ratio:  # the flusher starts writing back at this share of memory dirty
        from harness.knobs import sysctl
        sysctl("vm.dirty_background_ratio", workload.dirty_background_ratio)
    tracer = BlockIssueTrace(*device.dev_t) if trace else None
    runner = Runner(device, workload, tracer, echo)
    by_label = {v.label: v for v in variants}
    order = stats.alternating_order(list(by_label), first_rep + reps)[first_rep * len(by_label):]
    total = first_rep + reps
    results: dict[str, list[RepResult]] = {v.label: [] for v in variants}
    meter = LoadMeter()
    try:
        with progress(f"io bench {label}".strip(), total=len(order)) as bar:
            for i, (rep, name) in enumerate(order):
                bar.update(description=f"{label} rep {rep + 1}/{total} {name}".strip())
                plan = by_label[name].plan(workload.engine)
                meter.start()  # the host's load over this repetition: what says whether it can be judged
                if ebpf:
                    with session(probes=("blk",), devices=[device.path]) as rec:
                        res = runner.run(plan, seed=1000 * rep + i)
                    res.ebpf = rec.results()
                else:
                    res = runner.run(plan, seed=1000 * rep + i)
                res.host_load = meter.stop()
                results[name].append(res)
                bar.advance()
    finally:
        if tracer:
            tracer.close()
    return results, order


def write_samples(run: Any, results: dict[str, list[RepResult]], prefix: str = "") -> None:
    """<variant>.npy (all repetitions, int64 ns) and <variant>-rep<k>.npy (one per repetition), with
    <variant>-rep<k>-ctx.npy (service_ns << 2 | overlap bits per read); with --ebpf,
    ebpf-<variant>-rep<k>.json (the eBPF track's per-class block-layer histograms of that repetition)."""
    for label, reps in results.items():
        name = f"{prefix}{label}"
        for k, r in enumerate(reps):
            if r.ebpf is not None:
                run.write_json(f"ebpf-{name}-rep{k}", r.ebpf)
        run.write_samples(name, np.concatenate([r.latencies_ns for r in reps]).astype(np.int64))
        for k, r in enumerate(reps):
            run.write_samples(f"{name}-rep{k}", r.latencies_ns.astype(np.int64))
            if r.contexts is not None:  # service_ns << 2 | overlap bits, one per read (ioload --ctx-out)
                run.write_samples(f"{name}-rep{k}-ctx", r.contexts.astype(np.int64))
            if r.clocks is not None:  # due, submit, complete per read (ns, CLOCK_MONOTONIC)
                run.write_samples(f"{name}-rep{k}-clocks", r.clocks.astype(np.int64))
            if r.wlog is not None:  # submit, complete, bytes per spill write
                run.write_samples(f"{name}-rep{k}-wlog", r.wlog.astype(np.int64))
            if r.blk_pairs is not None:  # block layer issue, complete, op, class, level per request
                run.write_samples(f"{name}-rep{k}-blk", r.blk_pairs.astype(np.int64))


def with_scheduler(device: Device, scheduler: str | None) -> str:
    """Select the scheduler on the benchmark device (journaled); returns the one in effect."""
    if scheduler:
        set_scheduler(device.path, scheduler)
    return scheduler_of(device.path)
