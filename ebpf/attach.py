"""Loading and attaching a recording's programs: kvds.bpf.c's compile-once object (ebpf/objects.py) opened
through libbpf (ebpf/libbpf_loader.py), with only the chosen probe sets' programs and maps.

libbpf is the only loader: it needs the kernel's BTF (/sys/kernel/btf/vmlinux), not kernel headers, and every host
kvds records on has it (ebpf/README.md, "One source, one loader"). A host without it is told so by the doctor
(`ebpf.libbpf`, exit 3), never given a second program of its own.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.errors import Unavailable, UserError

from ebpf.programs import ProgramSpec

LOADER = "libbpf"  # what a recording's summary names as the loader (runs filed before 2026-12-02 may say "bcc")
COMPLETE_ENV = "KVDS_EBPF_COMPLETE_HOOK"  # the block programs: "tp_btf" (default, falls back) or "tracepoint"


def libbpf_status() -> tuple[bool, str]:
    """(usable, reason) for the libbpf route, without compiling or loading anything."""
    from ebpf import libbpf_loader, objects

    try:
        ver = libbpf_loader.version()
    except Unavailable as exc:
        return False, str(exc)
    ok, reason = objects.status()
    return ok, f"libbpf {ver}; {reason}"


def complete_hook() -> str:
    """How the block events are hooked: $KVDS_EBPF_COMPLETE_HOOK, default tp_btf (a bad value is a UserError)."""
    from ebpf import libbpf_loader

    hook = os.environ.get(COMPLETE_ENV, "tp_btf")
    if hook not in libbpf_loader.COMPLETE_HOOKS:
        raise UserError(f"{COMPLETE_ENV}={hook!r}: choose from {', '.join(libbpf_loader.COMPLETE_HOOKS)}")
    return hook


@dataclass
class Loaded:
    bpf: Any                 # libbpf_loader.LibbpfObject: maps by name, programs attached
    load_seconds: float      # what a recording waits for before it counts: open + load + attach
    compile_seconds: float   # clang on first use only (0.0 when the object was cached)
    detail: str = ""         # how the block events are hooked (tp_btf, or tracepoint when tp_btf failed)
    commands: dict[str, Any] | None = None  # the object loaded and the commands that built it


def load_program(spec: ProgramSpec) -> Loaded:
    """Compile (only when not cached), load and attach the programs of a ProgramSpec."""
    from ebpf import libbpf_loader, objects
    from harness.knobs.mounts import TRACEFS

    if "faults" in spec.probes:
        bad = objects.check_fault_format(Path(TRACEFS))
        if bad:
            raise Unavailable(f"cannot record faults here: {bad}")
    hook = complete_hook()
    t0 = time.perf_counter()
    path, compile_s = objects.build()
    detail = ""
    try:
        bpf = libbpf_loader.LibbpfObject(path, tuple(spec.probes), spec.filter_tasks, spec.filter_devices,
                                         spec.follow_children, complete_hook=hook, devices=spec.devices)
    except Unavailable as exc:
        if "blk" not in spec.probes or hook == "tracepoint":
            raise
        # A kernel whose BTF lacks what the tp_btf programs read: the classic tracepoints.
        bpf = libbpf_loader.LibbpfObject(path, tuple(spec.probes), spec.filter_tasks, spec.filter_devices,
                                         spec.follow_children, complete_hook="tracepoint", devices=spec.devices)
        detail = f"block_rq_insert/issue/complete via tracepoint (tp_btf failed: {exc})"
    if not detail and "blk" in spec.probes:
        detail = f"block_rq_insert/issue/complete via {hook}"
    commands = {"object": str(path), "built_by": objects.built_by()}
    if commands["built_by"] is None:
        commands["note"] = "built before kvds kept an object's build commands; python -m ebpf.objects --dry-run"
    return Loaded(bpf, time.perf_counter() - t0 - compile_s, compile_s, detail, commands)


def program_stats(bpf: Any) -> dict[str, tuple[int, int]]:
    """{tracepoint: (runs, ns inside the program)} since load; counted only while kernel.bpf_stats_enabled=1."""
    from ebpf import libbpf_loader

    return _per_program(bpf, libbpf_loader.run_stats)


def missed_events(bpf: Any) -> dict[str, int]:
    """{"block/block_rq_complete": n, ...}: runs of each loaded program the kernel skipped (recursion_misses).
    Read before the programs are unloaded; over all devices and tasks, not just the filtered."""
    from ebpf import libbpf_loader

    return _per_program(bpf, libbpf_loader.recursion_misses)


def _per_program(bpf: Any, read: Callable[[int], Any]) -> dict[str, Any]:
    """{tracepoint: read(program fd)} for every loaded program whose reading is known (not None)."""
    readings = {tp: read(fd) for tp, fd in sorted(bpf.program_fds.items())}
    return {tp: v for tp, v in readings.items() if v is not None}
