"""The C structs of kvds's BPF objects as ctypes, defined once: the keys and values of every map and the .rodata
configuration of ebpf/bpf_src/kvds.bpf.c (recordings, ebpf/libbpf_loader.py) and ebpf/bpf_src/net_trace.bpf.c
(ebpf/net_trace.py).

Each class names its C struct (`C_NAME`); `MAP_TYPES` / `NET_MAP_TYPES` give each map's key and value type.
tests/ebpf/test_ebpf_structs.py compares all of them, member by member, with the BTF of the compiled objects
(`bpftool btf dump`), so a field added in C and not here fails a test, not a recording.
"""

from __future__ import annotations

import ctypes

c_u8, c_u16, c_u32, c_s32, c_u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64


# ---- kvds.bpf.c -----------------------------------------------------------------------------------------------
MAX_DEVS = 16  # KVDS_MAX_DEVS


class KvdsCfg(ctypes.Structure):
    """struct kvds_cfg in .rodata: written before load, constants for the verifier. Up to MAX_DEVS filtered
    devices are compared as constants; ndevs = 0 with filter_devices set means "look them up in blk_devs"."""
    C_NAME = "kvds_cfg"
    _fields_ = [("filter_tasks", c_u32), ("filter_devices", c_u32), ("ndevs", c_u32), ("devs", c_u32 * MAX_DEVS)]


class CommT(ctypes.Structure):
    C_NAME = "comm_t"
    _fields_ = [("c", ctypes.c_char * 16)]


class BlkHkey(ctypes.Structure):
    C_NAME = "blk_hkey"
    _fields_ = [("dev", c_u32), ("cls", c_u8), ("op", c_u8), ("kind", c_u8), ("slot", c_u8)]


class BlkAkey(ctypes.Structure):
    C_NAME = "blk_akey"
    _fields_ = [("dev", c_u32), ("cls", c_u8), ("op", c_u8), ("what", c_u8), ("pad", c_u8)]


class RqKey(ctypes.Structure):
    C_NAME = "rq_key"
    _fields_ = [("dev", c_u32), ("pad", c_u32), ("sector", c_u64)]


class RqVal(ctypes.Structure):
    C_NAME = "rq_val"
    _fields_ = [("ts", c_u64), ("cls", c_u8), ("op", c_u8), ("pad", c_u16), ("pad2", c_u32)]


class RcStart(ctypes.Structure):
    C_NAME = "rc_start_t"
    _fields_ = [("ts", c_u64), ("kind", c_u32)]


class RcHkey(ctypes.Structure):
    C_NAME = "rc_hkey"
    _fields_ = [("tgid", c_u32), ("kind", c_u8), ("slot", c_u8), ("pad", c_u16)]


class RcSkey(ctypes.Structure):
    C_NAME = "rc_skey"
    _fields_ = [("tgid", c_u32), ("kind", c_u32)]


class RcStat(ctypes.Structure):
    C_NAME = "rc_stat"
    _fields_ = [("count", c_u64), ("ns", c_u64), ("reclaimed", c_u64), ("cgid", c_u64)]


class FaultKey(ctypes.Structure):
    C_NAME = "fault_key"
    _fields_ = [("tgid", c_u32), ("kind", c_u8), ("user", c_u8), ("pad", c_u16)]


MAP_TYPES: dict[str, tuple[type, type]] = {
    "want_tgid": (c_u32, c_u8), "want_cgid": (c_u64, c_u8), "comms": (c_u32, CommT),
    "blk_inserted": (RqKey, c_u64), "blk_issued": (RqKey, RqVal), "blk_marked": (RqKey, c_u8),
    "blk_devs": (c_u32, c_u8), "blk_hist": (BlkHkey, c_u64), "blk_acct": (BlkAkey, c_u64),
    "rc_start": (c_u32, RcStart), "rc_hist": (RcHkey, c_u64), "rc_stats": (RcSkey, RcStat),
    "fault_counts": (FaultKey, c_u64),
}


# ---- net_trace.bpf.c ------------------------------------------------------------------------------------------
MAX_PORTS, MAX_NETNS = 16, 4  # NET_MAX_PORTS / NET_MAX_NETNS


class NetCfg(ctypes.Structure):
    """struct net_cfg in .rodata (constants for the verifier)."""
    C_NAME = "net_cfg"
    _fields_ = [("ifindex", c_u32), ("dev_netns", c_u32), ("nports", c_u32), ("nnetns", c_u32),
                ("ports", c_u16 * MAX_PORTS), ("netns", c_u32 * MAX_NETNS), ("key", c_u32)]


class NqVal(ctypes.Structure):
    C_NAME = "nq_val"
    _fields_ = [("ts", c_u64), ("prio", c_u32), ("len", c_u32)]


class NqHkey(ctypes.Structure):
    C_NAME = "nq_hkey"
    _fields_ = [("prio", c_u32), ("slot", c_u32)]


class NqStat(ctypes.Structure):
    C_NAME = "nq_stat"
    _fields_ = [("count", c_u64), ("bytes", c_u64), ("sum_ns", c_u64), ("max_ns", c_u64)]


class NqAkey(ctypes.Structure):
    C_NAME = "nq_akey"
    _fields_ = [("prio", c_u32), ("what", c_u32)]


class RtxKey(ctypes.Structure):
    C_NAME = "rtx_key"
    _fields_ = [("netns", c_u32), ("prio", c_u32), ("sport", c_u16), ("dport", c_u16), ("err", c_s32)]


class ProbeKey(ctypes.Structure):
    C_NAME = "probe_key"
    _fields_ = [("netns", c_u32), ("sport", c_u16), ("dport", c_u16)]


class ProbeHkey(ctypes.Structure):
    C_NAME = "probe_hkey"
    _fields_ = [("prio", c_u32), ("slot", c_u32)]


class ProbeVal(ctypes.Structure):
    C_NAME = "probe_val"
    _fields_ = [("samples", c_u64), ("srtt_sum_us", c_u64), ("cwnd_sum", c_u64), ("srtt_min_us", c_u32),
                ("srtt_max_us", c_u32), ("srtt_last_us", c_u32), ("cwnd_min", c_u32), ("cwnd_max", c_u32),
                ("cwnd_last", c_u32), ("prio", c_u32), ("pad", c_u32)]


NET_MAP_TYPES: dict[str, tuple[type, type]] = {
    "nq_inflight": (c_u64, NqVal), "nq_hist": (NqHkey, c_u64), "nq_stats": (c_u32, NqStat),
    "nq_acct": (NqAkey, c_u64), "rtx_counts": (RtxKey, c_u64), "probe_flows": (ProbeKey, ProbeVal),
    "probe_srtt_hist": (ProbeHkey, c_u64),
}

CFG_OF = {"kvds.bpf.c": KvdsCfg, "net_trace.bpf.c": NetCfg}            # each object's .rodata `cfg`
MAPS_OF = {"kvds.bpf.c": MAP_TYPES, "net_trace.bpf.c": NET_MAP_TYPES}  # each object's maps
