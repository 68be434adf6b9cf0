"""Which loader runs a recording's kernel programs: libbpf (compile-once object, ebpf/objects.py) or bcc
(clang in-process per recording, ebpf/programs.py). Both produce the same maps, so results() is the same.

"auto" prefers libbpf whenever its route is usable here (libbpf.so.1 loads and an object is cached or can be
compiled); a libbpf failure after that choice is an error, never a silent fall-back to bcc.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.errors import Unavailable, UserError

BACKENDS = ("auto", "libbpf", "bcc")
ENV = "KVDS_EBPF_BACKEND"
COMPLETE_ENV = "KVDS_EBPF_COMPLETE_HOOK"  # libbpf's block programs: "tp_btf" (default, falls back) or "tracepoint"


def parse_backend(text: str | None) -> str:
    value = (text if text is not None else os.environ.get(ENV, "auto")).strip().lower()
    if value not in BACKENDS:
        raise UserError(f"unknown eBPF backend {value!r}; choose from {', '.join(BACKENDS)}")
    return value


def libbpf_status() -> tuple[bool, str]:
    """(usable, reason) for the libbpf route, without compiling or loading anything."""
    from ebpf import libbpf_loader, objects

    try:
        ver = libbpf_loader.version()
    except Unavailable as exc:
        return False, str(exc)
    ok, reason = objects.status()
    return ok, f"libbpf {ver}; {reason}"


def choose_backend(choice: str | None, probes: tuple[str, ...] = ()) -> str:
    """The concrete backend for a choice ("auto" -> libbpf when usable for these probe sets, else bcc).

    Call with tracefs mounted: for `faults` libbpf also needs the page-fault record kvds.bpf.c declares."""
    value = parse_backend(choice)
    if value != "auto":
        return value
    if not libbpf_status()[0]:
        return "bcc"
    if "faults" in probes:
        from ebpf.objects import check_fault_format
        from harness.knobs.mounts import TRACEFS

        if check_fault_format(Path(TRACEFS)) is not None:
            return "bcc"
    return "libbpf"


@dataclass
class Loaded:
    bpf: Any                 # bcc.BPF or libbpf_loader.LibbpfObject (the same table interface)
    load_seconds: float      # what a recording waits for before it counts: open/compile + load + attach
    compile_seconds: float   # libbpf: clang on first use only (0.0 when cached); bcc: included in load_seconds
    detail: str = ""         # libbpf: how the block events are hooked (tp_btf, or tracepoint when tp_btf failed)
    commands: dict[str, Any] | None = None  # libbpf: the object loaded and the commands that built it (bcc: none)


def load_program(backend: str, spec: Any) -> Loaded:
    """Compile (bcc: always; libbpf: only when not cached), load and attach the programs of a ProgramSpec."""
    if backend == "bcc":
        from ebpf.bcc_loader import load_bcc

        bcc = load_bcc()
        t0 = time.perf_counter()
        bpf = bcc.BPF(text=spec.source().encode(), cflags=["-w"])
        secs = time.perf_counter() - t0
        return Loaded(bpf, secs, secs)
    if backend != "libbpf":
        raise UserError(f"unknown eBPF backend {backend!r}")
    from ebpf import libbpf_loader, objects
    from harness.knobs.mounts import TRACEFS

    if "faults" in spec.probes:
        bad = objects.check_fault_format(Path(TRACEFS))
        if bad:
            raise Unavailable(f"libbpf backend cannot record faults here: {bad}; use --backend bcc")
    t0 = time.perf_counter()
    path, compile_s = objects.build()
    detail = ""
    hook = os.environ.get(COMPLETE_ENV, "tp_btf")
    if hook not in libbpf_loader.COMPLETE_HOOKS:
        raise UserError(f"{COMPLETE_ENV}={hook!r}: choose from {', '.join(libbpf_loader.COMPLETE_HOOKS)}")
    try:
        bpf = libbpf_loader.LibbpfObject(path, tuple(spec.probes), spec.filter_tasks, spec.filter_devices,
                                         spec.follow_children, complete_hook=hook, devices=spec.devices)
    except Unavailable as exc:
        if "blk" not in spec.probes or hook == "tracepoint":
            raise
        # A kernel whose BTF lacks what the tp_btf programs read: the classic tracepoints, as bcc does it.
        bpf = libbpf_loader.LibbpfObject(path, tuple(spec.probes), spec.filter_tasks, spec.filter_devices,
                                         spec.follow_children, complete_hook="tracepoint", devices=spec.devices)
        detail = f"block_rq_insert/issue/complete via tracepoint (tp_btf failed: {exc})"
    if not detail and "blk" in spec.probes:
        detail = f"block_rq_insert/issue/complete via {hook}"
    commands = {"object": str(path), "built_by": objects.built_by()}
    if commands["built_by"] is None:
        commands["note"] = "built before kvds kept an object's build commands; python -m ebpf.objects --dry-run"
    return Loaded(bpf, time.perf_counter() - t0 - compile_s, compile_s, detail, commands)


def program_fds(bpf: Any) -> dict[str, int]:
    """{"block/block_rq_complete": fd, ...} of the loaded programs, for either backend."""
    from ebpf import libbpf_loader

    if isinstance(bpf, libbpf_loader.LibbpfObject):
        return dict(bpf.program_fds)
    fds = {}
    for name, fn in getattr(bpf, "funcs", {}).items():  # bcc: TRACEPOINT_PROBE(cat, event) -> tracepoint__cat__event
        text = name.decode() if isinstance(name, bytes) else str(name)
        if text.startswith("tracepoint__") and getattr(fn, "fd", -1) >= 0:
            fds[text.removeprefix("tracepoint__").replace("__", "/", 1)] = fn.fd
    return fds


def program_stats(bpf: Any) -> dict[str, tuple[int, int]]:
    """{tracepoint: (runs, ns inside the program)} since load; counted only while kernel.bpf_stats_enabled=1."""
    from ebpf import libbpf_loader

    return _per_program(bpf, libbpf_loader.run_stats)


def missed_events(bpf: Any) -> dict[str, int]:
    """{"block/block_rq_complete": n, ...}: runs of each loaded program the kernel skipped (recursion_misses),
    for either backend. Read before the programs are unloaded; over all devices and tasks, not just the filtered."""
    from ebpf import libbpf_loader

    return _per_program(bpf, libbpf_loader.recursion_misses)


def _per_program(bpf: Any, read: Callable[[int], Any]) -> dict[str, Any]:
    """{tracepoint: read(program fd)} for every loaded program whose reading is known (not None)."""
    readings = {tp: read(fd) for tp, fd in sorted(program_fds(bpf).items())}
    return {tp: v for tp, v in readings.items() if v is not None}
