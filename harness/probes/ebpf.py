"""Tracing mechanisms: tracefs, the tracepoints kvds uses, kprobes, fentry, taskstats delay accounting."""

from __future__ import annotations

from pathlib import Path

from harness.capability import Capability, available, unavailable
from harness.kconfig import config_state
from harness.knobs.mounts import TRACEFS, is_mounted

AREA = "ebpf"

TRACEPOINTS = (
    "block/block_rq_issue", "block/block_rq_insert", "block/block_rq_complete",
    "vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
    "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end",
    "exceptions/page_fault_user", "exceptions/page_fault_kernel",
)


def probes() -> list[Capability]:
    out = []
    bpf = config_state("BPF_SYSCALL")
    out.append(available("bpf", "CONFIG_BPF_SYSCALL on", AREA) if bpf in ("y", "unknown")
               else unavailable("bpf", "CONFIG_BPF_SYSCALL off", AREA))
    mounted = is_mounted(TRACEFS, "tracefs")
    if mounted:
        out.append(available("tracefs", f"mounted at {TRACEFS}", AREA))
        for tp in TRACEPOINTS:
            name = "tracepoint." + tp.replace("/", ":")
            if (Path(TRACEFS) / "events" / tp).is_dir():
                out.append(available(name, "present in tracefs", AREA))
            else:
                out.append(unavailable(name, f"no events/{tp} in tracefs", AREA))
    elif config_state("TRACING") in ("y", "unknown") or Path(TRACEFS).is_dir():
        out.append(available("tracefs", f"not mounted; kvds mounts it at {TRACEFS} through the journal", AREA))
    else:
        out.append(unavailable("tracefs", "CONFIG_TRACING off", AREA))
    kp = config_state("KPROBES")
    out.append(available("kprobes", "CONFIG_KPROBES on", AREA) if kp == "y"
               else unavailable("kprobes", "CONFIG_KPROBES off: kprobe-based tools (bcc biolatency) fail; kvds uses tracepoints", AREA))
    fp = config_state("FPROBE")
    out.append(available("fprobe", "CONFIG_FPROBE on", AREA) if fp == "y"
               else unavailable("fprobe", "CONFIG_FPROBE off", AREA))
    delay = Path("/proc/sys/kernel/task_delayacct")
    out.append(available("delayacct", f"kernel.task_delayacct = {delay.read_text().strip()}", AREA) if delay.exists()
               else unavailable("delayacct", "no kernel.task_delayacct sysctl (CONFIG_TASK_DELAY_ACCT off)", AREA))
    return out
