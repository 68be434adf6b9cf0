"""What every io run files beside its summary: the configuration with the load averages around it, where the
block-layer classes come from, and the helper commands it started (meta.json `commands`)."""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any, Callable

from harness.results import Run
from io_priority.device import Device
from io_priority.workload import RepResult, Workload

ENGINE_NOTE = ("ioload (io_priority/ioload.c): psync via pread/pwrite + ioprio_set per thread; io_uring via liburing "
               "with sqe->ioprio per request")
EBPF_NOTE = "block-layer classes per request come from tracefs block_rq_issue (block_layer keys)"


def config_of(workload: Workload, dev: Device, scheduler: str, reps: int, **extra: Any) -> dict[str, Any]:
    """The run's configuration; `loadavg_start` (given by the caller, read before the device was set up) and
    `loadavg_end` bracket the measurement (the environment's own loadavg is read when the run is stored)."""
    return {"engine": workload.engine, "workload": workload.as_dict(), "device": dev.as_dict(),
            "scheduler": scheduler, "reps": reps, "load_generator": ENGINE_NOTE,
            "loadavg_end": list(os.getloadavg()), **extra}


def ebpf_note(used: bool) -> dict[str, Any]:
    """Whether per-class block-layer histograms from the eBPF track are in this run (ebpf-*.json files)."""
    if used:
        return {"ebpf_histograms": "ebpf-<variant>-rep<k>.json", "ebpf_note": "recorded with ebpf.recorder.session"}
    return {"ebpf_histograms": None, "ebpf_note": "available: rerun with --ebpf; " + EBPF_NOTE}


def commands_of(results: dict[str, list[RepResult]], order: list[tuple[int, str]],
                scheduler: str | None = None) -> list[dict[str, Any]]:
    """Every ioload command the repetitions ran, in the order run: variant, rep, reader and writer argv."""
    seen: dict[str, int] = {}
    out = []
    for rep, name in order:
        k = seen.get(name, 0)
        seen[name] = k + 1
        r = results[name][k] if k < len(results.get(name, [])) else None
        if r is None or r.argv is None:
            continue
        out.append({**({"scheduler": scheduler} if scheduler else {}), "variant": name, "rep": rep, **r.argv})
    return out


def record_commands(run: Run, commands: list[dict[str, Any]]) -> None:
    """meta.json `commands`: what ran underneath this run, as run."""
    run.update_meta(commands=commands)


def echo_command(verbose: bool) -> Callable[[str, list[str]], None] | None:
    """--verbose: each helper's command line on stderr as it starts (never on stdout, where --json goes)."""
    if not verbose:
        return None
    # stderr directly, not say(): --json quiets status lines, and what was asked for with --verbose is printed
    return lambda role, argv: print(f"running ({role}): {shlex.join(argv)}", file=sys.stderr, flush=True)
