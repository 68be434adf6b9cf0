"""The ebpf track's doctor probes (area "ebpf", registered in pyproject.toml's `kvds.probes`): tracefs, the
tracepoints kvds uses, kprobes, fprobe, libbpf, taskstats delay accounting.

The `ebpf.*` capabilities are found by trying: libbpf loads kvds's compiled object with every program (compiling
it first when not cached), the TASKSTATS genetlink family answers a query, and the tracepoints of each probe set
exist in tracefs (mounted for the look in a scoped journal when it is not mounted).

Only the host's answers are "unavailable": a missing library, toolchain, kernel BTF, kernel feature or genetlink
family. This module failing to import (the doctor then reports the area as one error row), or kvds's own BPF object
failing to compile or load once libbpf and the toolchain are there, is a kvds error (status "error", traceback
kept), never a reason to skip.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import journal
from harness.capability import Capability, available, kvds_error, unavailable
from harness.kconfig import config_state
from harness.knobs.mounts import TRACEFS, is_mounted, mount

from ebpf import libbpf_loader, objects
from ebpf.attach import libbpf_status
from ebpf.objects import check_fault_format
from ebpf.programs import TRACEPOINTS as PROBE_TPS
from ebpf.taskstats import family_status

AREA = "ebpf"

TRACEPOINTS = (
    "block/block_rq_issue", "block/block_rq_insert", "block/block_rq_complete",
    "vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
    "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end",
    "exceptions/page_fault_user", "exceptions/page_fault_kernel",
)


def _look(names: tuple[str, ...]) -> tuple[dict[str, bool], str | None]:
    """(which tracepoints exist, why kvds.bpf.c's page-fault record would not match or None)."""
    present = {tp: (Path(TRACEFS) / "events" / tp).is_dir() for tp in names}
    return present, check_fault_format(Path(TRACEFS))


def _present_tracepoints(names: tuple[str, ...]) -> tuple[dict[str, bool] | None, str | None]:
    """Which tracepoints tracefs lists (and the page-fault format check); mounts tracefs briefly (scoped journal)
    when root and unmounted."""
    if is_mounted(TRACEFS, "tracefs"):
        return _look(names)
    if os.geteuid() != 0:
        return None, None
    try:
        with journal.scoped():
            mount("tracefs", TRACEFS)
            return _look(names)
    except OSError:  # mount(8) refused: the host's answer
        return None, None


def _host_lacks(name: str, ok: bool, reason: str) -> Capability | None:
    """The loader's host part: unavailable without it, needs-root to load programs; None when the probe goes on."""
    if not ok:
        return unavailable(name, reason, AREA)
    if os.geteuid() != 0:
        return Capability(name, "needs-root", f"loading BPF programs needs root ({reason})", AREA)
    return None


def _libbpf_probe() -> Capability:
    """The compile-once route: libbpf.so.1 loads, kvds.bpf.c compiles (or is cached) and passes the verifier
    with every program (loaded, not attached).

    The host's part (libbpf.so, clang/bpftool/libbpf-dev, kernel BTF) is checked first without compiling; once
    that is there, a failure to build or load kvds's own object is kvds's error."""
    ok, reason = libbpf_status()
    if lacking := _host_lacks("ebpf.libbpf", ok, reason):
        return lacking
    try:
        path, secs = objects.build()
    except Exception as exc:
        return kvds_error("ebpf.libbpf", "compiling kvds's BPF object (the toolchain is present)", AREA, exc)
    try:
        obj = libbpf_loader.LibbpfObject(path, tuple(libbpf_loader.PROGRAMS), filter_tasks=True,
                                         filter_devices=True, follow_children=True, attach=False)
        obj.cleanup()
    except Exception as exc:
        return kvds_error("ebpf.libbpf", f"loading kvds's own BPF object {path.name}", AREA, exc)
    how = f"compiled now in {secs:.1f} s" if secs else "cached"
    return available("ebpf.libbpf", f"libbpf {libbpf_loader.version()} loads {path.name} ({how}; every program "
                                    f"passes the verifier)", AREA)


def _taskstats_probe() -> Capability:
    """One TGID query for this process over the TASKSTATS genetlink family."""
    try:  # family_status answers False only for a real absence (no family, no CAP_NET_ADMIN, too old)
        ok, reason = family_status()
    except Exception as exc:
        return kvds_error("ebpf.taskstats", "querying taskstats", AREA, exc)
    return available("ebpf.taskstats", reason, AREA) if ok else unavailable("ebpf.taskstats", reason, AREA)


def probes() -> list[Capability]:
    out = []
    bpf = config_state("BPF_SYSCALL")
    out.append(available("bpf", "CONFIG_BPF_SYSCALL on", AREA) if bpf in ("y", "unknown")
               else unavailable("bpf", "CONFIG_BPF_SYSCALL off", AREA))
    mounted = is_mounted(TRACEFS, "tracefs")
    wanted = tuple(dict.fromkeys(TRACEPOINTS + tuple(tp for tps in PROBE_TPS.values() for tp in tps)))
    present, fault_format_problem = _present_tracepoints(wanted)
    if mounted:
        out.append(available("tracefs", f"mounted at {TRACEFS}", AREA))
    elif config_state("TRACING") in ("y", "unknown") or Path(TRACEFS).is_dir():
        out.append(available("tracefs", f"not mounted; kvds mounts it at {TRACEFS} through the journal", AREA))
    else:
        out.append(unavailable("tracefs", "CONFIG_TRACING off", AREA))
    if present is not None:
        for tp in TRACEPOINTS:
            name = "tracepoint." + tp.replace("/", ":")
            out.append(available(name, "present in tracefs", AREA) if present[tp]
                       else unavailable(name, f"no events/{tp} in tracefs", AREA))
    kp = config_state("KPROBES")
    out.append(available("kprobes", "CONFIG_KPROBES on", AREA) if kp == "y"
               else unavailable("kprobes", "CONFIG_KPROBES off: kprobe-based tools (bcc biolatency) fail; kvds uses "
                                           "tracepoints", AREA))
    fp = config_state("FPROBE")
    out.append(available("fprobe", "CONFIG_FPROBE on", AREA) if fp == "y"
               else unavailable("fprobe", "CONFIG_FPROBE off", AREA))
    delay = Path("/proc/sys/kernel/task_delayacct")
    out.append(available("delayacct", f"kernel.task_delayacct = {delay.read_text().strip()}", AREA) if delay.exists()
               else unavailable("delayacct", "no kernel.task_delayacct sysctl (CONFIG_TASK_DELAY_ACCT off)", AREA))

    libbpf_cap = _libbpf_probe()
    ts_cap = _taskstats_probe()
    out += [libbpf_cap, ts_cap]
    for probe, tps in PROBE_TPS.items():
        name = f"ebpf.probe.{probe}"
        missing = [tp for tp in tps if present is not None and not present.get(tp, False)]
        if not libbpf_cap.ok:
            out.append(Capability(name, libbpf_cap.status, f"needs ebpf.libbpf ({libbpf_cap.reason})", AREA))
        elif probe == "faults" and fault_format_problem:  # kvds.bpf.c's hand-declared page-fault record
            out.append(unavailable(name, f"the page-fault record differs from kvds.bpf.c's: {fault_format_problem}",
                                   AREA))
        elif present is None:
            out.append(unavailable(name, "tracefs not mounted and cannot be mounted to check tracepoints", AREA))
        elif missing:
            out.append(unavailable(name, f"tracepoints missing: {', '.join(missing)}", AREA))
        else:
            out.append(available(name, f"tracepoints {', '.join(t.split('/')[1] for t in tps)} (libbpf)", AREA))
    if not delay.exists():
        out.append(unavailable("ebpf.probe.delays", "no kernel.task_delayacct sysctl (CONFIG_TASK_DELAY_ACCT off)",
                               AREA))
    elif not ts_cap.ok:
        out.append(unavailable("ebpf.probe.delays", f"needs ebpf.taskstats: {ts_cap.reason}", AREA))
    else:
        out.append(available("ebpf.probe.delays", "taskstats TGID queries; kvds sets kernel.task_delayacct=1 through "
                                                   "the journal", AREA))
    return out
