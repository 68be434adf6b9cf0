"""What kvds.bpf.c's programs encode, and which programs a recording loads.

The C source is ebpf/bpf_src/kvds.bpf.c, the only one (compiled once, ebpf/objects.py; loaded through libbpf,
ebpf/libbpf_loader.py). This module holds its vocabulary on the Python side: the codes its programs store in
map keys (ebpf/recorder.py decodes them by these tables), the tracepoints each probe set hooks, and the
`ProgramSpec` of one recording (probe sets and filters, written into the object's .rodata before load).
"""

from __future__ import annotations

from dataclasses import dataclass

OPS = ("read", "write", "flush", "discard", "other")          # blk_op() in kvds.bpf.c
CLASSES = ("none", "rt", "be", "idle")                         # (ioprio >> 13) & 7
BLK_KINDS = ("issue_to_complete", "insert_to_issue")           # blk_hkey.kind
# blk_acct's `what` codes: requests the issue -> complete pairing could not time (kvds.bpf.c, BLK_UNTIMED...).
BLK_ACCT = ("untimed", "overwritten", "lost")
RECLAIM_KINDS = ("direct", "memcg")                            # rc_begin(kind)
FAULT_BITS = {0: "protection", 1: "write", 4: "exec"}  # x86 page-fault error_code bits kvds keeps

TRACEPOINTS = {
    "blk": ("block/block_rq_insert", "block/block_rq_issue", "block/block_rq_complete", "block/block_getrq"),
    "reclaim": ("vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
                "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end"),
    "faults": ("exceptions/page_fault_user", "exceptions/page_fault_kernel"),
}


@dataclass(frozen=True)
class ProgramSpec:
    """The programs one recording loads: its probe sets and filters (kvds.bpf.c's struct kvds_cfg)."""
    probes: tuple[str, ...]
    filter_tasks: bool = False
    filter_devices: bool = False
    follow_children: bool = True
    devices: tuple[int, ...] = ()  # kernel dev_t (major << 20 | minor) of the device filter
