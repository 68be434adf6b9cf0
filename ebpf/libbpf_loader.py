"""A thin ctypes layer over Debian's libbpf.so.1 (1.1.x) that loads ebpf/bpf_src/kvds.bpf.c's compiled object
and exposes its maps as tables (`obj[b"map"]`, `.Key`, `.Leaf`, `table[key] = leaf`, `table.items()`,
`obj.cleanup()`; the shape of bcc's table API, which kvds used before libbpf was its only loader).

Only symbols exported by libbpf 1.1 are used (checked with `nm -D`): bpf_object__open_file, bpf_object__load,
bpf_object__next_program/_next_map, bpf_program__name/__set_autoload/__attach, bpf_map__name/__set_autocreate/
__set_initial_value/__fd/__key_size/__value_size, bpf_map_get_next_key, bpf_map_lookup_elem,
bpf_map_update_elem, bpf_link__destroy, bpf_object__close, libbpf_set_print (warnings are kept for errors).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from harness.errors import Unavailable

from ebpf.bpf_structs import MAP_TYPES, MAX_DEVS, KvdsCfg, c_u32, c_u64

LIBBPF = "libbpf.so.1"


# Which programs and maps each probe set needs (names as in kvds.bpf.c). The blk set's insert/issue/complete
# programs are chosen as one set by hook: tp_btf first (struct request read directly: no perf record is
# formatted, and a completion interrupting another BPF program is not lost), else the classic tracepoints.
PROGRAMS = {
    "blk": (),
    "reclaim": ("rc_direct_begin", "rc_direct_end", "rc_memcg_begin", "rc_memcg_end"),
    "faults": ("fault_user", "fault_kernel"),
}
BLK_HOOKS = {"tp_btf": ("blk_insert_btf", "blk_issue_btf", "blk_complete_btf"),
             "tracepoint": ("blk_insert", "blk_issue", "blk_complete")}
COMPLETE_HOOKS = {hook: progs[-1] for hook, progs in BLK_HOOKS.items()}  # the block_rq_complete program per hook
# Program name -> the tracepoint it reports on (missed_events keys, the same for both hooks).
TRACEPOINT_OF = {
    "blk_insert": "block/block_rq_insert", "blk_issue": "block/block_rq_issue", "blk_getrq": "block/block_getrq",
    "blk_complete": "block/block_rq_complete", "blk_insert_btf": "block/block_rq_insert",
    "blk_issue_btf": "block/block_rq_issue", "blk_complete_btf": "block/block_rq_complete",
    "rc_direct_begin": "vmscan/mm_vmscan_direct_reclaim_begin", "rc_direct_end": "vmscan/mm_vmscan_direct_reclaim_end",
    "rc_memcg_begin": "vmscan/mm_vmscan_memcg_reclaim_begin", "rc_memcg_end": "vmscan/mm_vmscan_memcg_reclaim_end",
    "fault_user": "exceptions/page_fault_user", "fault_kernel": "exceptions/page_fault_kernel",
    "follow_fork": "sched/sched_process_fork",
}
MAPS = {
    "common": ("want_tgid", "want_cgid", "comms"),
    "blk": ("blk_inserted", "blk_issued", "blk_marked", "blk_devs", "blk_hist", "blk_acct"),
    "reclaim": ("rc_start", "rc_hist", "rc_stats"),
    "faults": ("fault_counts",),
}


def kvds_cfg(filter_tasks: bool, filter_devices: bool, devices: tuple[int, ...] = ()) -> KvdsCfg:
    devs = tuple(dict.fromkeys(devices)) if filter_devices and len(set(devices)) <= MAX_DEVS else ()
    return KvdsCfg(int(filter_tasks), int(filter_devices), len(devs), (c_u32 * MAX_DEVS)(*devs))


# ---- the library ---------------------------------------------------------------------------------------------
_lib: ctypes.CDLL | None = None
_log: list[str] = []
_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_print_cb: Any = None


def _bind(lib: ctypes.CDLL) -> None:
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    sigs = {
        "bpf_object__open_file": (vp, [cp, vp]), "bpf_object__load": (i, [vp]), "bpf_object__close": (None, [vp]),
        "bpf_object__next_program": (vp, [vp, vp]), "bpf_object__next_map": (vp, [vp, vp]),
        "bpf_object__find_map_by_name": (vp, [vp, cp]),
        "bpf_program__name": (cp, [vp]), "bpf_program__set_autoload": (i, [vp, ctypes.c_bool]),
        "bpf_program__attach": (vp, [vp]), "bpf_link__destroy": (i, [vp]),
        "bpf_map__name": (cp, [vp]), "bpf_map__set_autocreate": (i, [vp, ctypes.c_bool]),
        "bpf_map__set_initial_value": (i, [vp, vp, ctypes.c_size_t]), "bpf_map__fd": (i, [vp]),
        "bpf_map__key_size": (c_u32, [vp]), "bpf_map__value_size": (c_u32, [vp]),
        "bpf_map_get_next_key": (i, [i, vp, vp]), "bpf_map_lookup_elem": (i, [i, vp, vp]),
        "bpf_map_update_elem": (i, [i, vp, vp, c_u64]),
        "bpf_obj_get_info_by_fd": (i, [i, vp, ctypes.POINTER(c_u32)]), "bpf_program__fd": (i, [vp]),
        "bpf_program__section_name": (cp, [vp]),
        "libbpf_set_print": (vp, [vp]), "libbpf_major_version": (c_u32, []), "libbpf_minor_version": (c_u32, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _capture_print(level: int, fmt: bytes, va: int) -> int:
    """libbpf's print callback: format with vsnprintf (va_list passed through) and keep warnings for errors."""
    buf = ctypes.create_string_buffer(2048)
    _libc.vsnprintf(buf, len(buf), fmt, ctypes.c_void_p(va))
    if level <= 1:  # LIBBPF_WARN = 0, LIBBPF_INFO = 1 (DEBUG = 2 dropped)
        _log.append(buf.value.decode(errors="replace").rstrip())
        del _log[:-40]
    return 0


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]


def lib() -> ctypes.CDLL:
    global _lib, _print_cb
    if _lib is None:
        try:
            handle = ctypes.CDLL(LIBBPF, use_errno=True)
            _bind(handle)
        except (OSError, AttributeError) as exc:
            raise Unavailable(f"{LIBBPF} not usable ({exc}); install Debian's libbpf1") from None
        _print_cb = _PRINT_FN(_capture_print)
        handle.libbpf_set_print(ctypes.cast(_print_cb, ctypes.c_void_p))
        _lib = handle
    return _lib


def version() -> str:
    lb = lib()
    return f"{lb.libbpf_major_version()}.{lb.libbpf_minor_version()}"


def _fail(what: str, err: int) -> Unavailable:
    detail = [line for line in _log if line][-3:]
    _log.clear()
    return Unavailable(f"libbpf {what}: {os.strerror(abs(err))}" + (f" ({' | '.join(detail)})" if detail else ""))


# struct bpf_prog_info (uapi, append-only): run_time_ns at 192, run_cnt at 200 (5.1), recursion_misses at 208
# (5.12), of 232 bytes.
PROG_INFO_SIZE, RUN_TIME_NS_AT, RUN_CNT_AT, RECURSION_MISSES_AT = 232, 192, 200, 208


def run_stats(prog_fd: int) -> tuple[int, int] | None:
    """(runs, ns spent inside the program) since load, counted only while kernel.bpf_stats_enabled is 1."""
    buf = (ctypes.c_uint8 * PROG_INFO_SIZE)()
    size = c_u32(PROG_INFO_SIZE)
    if lib().bpf_obj_get_info_by_fd(prog_fd, buf, ctypes.byref(size)) < 0 or size.value < RUN_CNT_AT + 8:
        return None
    raw = bytes(buf)
    return (int.from_bytes(raw[RUN_CNT_AT:RUN_CNT_AT + 8], "little"),
            int.from_bytes(raw[RUN_TIME_NS_AT:RUN_TIME_NS_AT + 8], "little"))


def recursion_misses(prog_fd: int) -> int | None:
    """How many times the kernel skipped this program because a BPF program was already running on that CPU
    (a completion interrupt arriving during another probe): events the histograms cannot contain."""
    buf = (ctypes.c_uint8 * PROG_INFO_SIZE)()
    size = c_u32(PROG_INFO_SIZE)
    if lib().bpf_obj_get_info_by_fd(prog_fd, buf, ctypes.byref(size)) < 0 or size.value < RECURSION_MISSES_AT + 8:
        return None
    return int.from_bytes(bytes(buf[RECURSION_MISSES_AT:RECURSION_MISSES_AT + 8]), "little")


# ---- tables ---------------------------------------------------------------------------------------------------
class Table:
    """One BPF map by fd: key/leaf types, update, keys, items (what recorder.py and net_trace.py use)."""

    def __init__(self, name: str, fd: int, key_t: type, leaf_t: type) -> None:
        self.name, self.fd, self.Key, self.Leaf = name, fd, key_t, leaf_t

    def __setitem__(self, key: Any, leaf: Any) -> None:
        rc = lib().bpf_map_update_elem(self.fd, ctypes.byref(key), ctypes.byref(leaf), 0)
        if rc < 0:
            raise _fail(f"update of map {self.name}", rc)

    def keys(self) -> Iterator[Any]:
        lb = lib()
        prev: Any = None
        while True:
            nxt = self.Key()
            if lb.bpf_map_get_next_key(self.fd, None if prev is None else ctypes.byref(prev), ctypes.byref(nxt)) < 0:
                return
            yield nxt
            prev = nxt

    def items(self) -> list[tuple[Any, Any]]:
        out = []
        lb = lib()
        for k in self.keys():
            v = self.Leaf()
            if lb.bpf_map_lookup_elem(self.fd, ctypes.byref(k), ctypes.byref(v)) == 0:
                out.append((k, v))
        return out


@dataclass
class LoadTimes:
    open_s: float
    load_s: float   # verifier + map creation
    attach_s: float


class LibbpfObject:
    """An opened, loaded and attached kvds.bpf.o for one session: only the chosen probe sets' programs load."""

    def __init__(self, path: Path, probes: tuple[str, ...], filter_tasks: bool, filter_devices: bool,
                 follow_children: bool, attach: bool = True, complete_hook: str = "tp_btf",
                 devices: tuple[int, ...] = ()) -> None:
        """devices: the kernel dev_t values (major << 20 | minor) of the device filter, compared as constants
        when there are at most MAX_DEVS; the caller fills the blk_devs map as well (used when there are more)."""
        lb = lib()
        self._links: list[int] = []
        self._tables: dict[str, Table] = {}
        self.program_fds: dict[str, int] = {}  # "block/block_rq_complete" -> fd of the loaded program
        t0 = time.perf_counter()
        obj = lb.bpf_object__open_file(str(path).encode(), None)
        if not obj:
            raise _fail(f"open of {path}", ctypes.get_errno())
        self._obj: int | None = obj
        try:
            wanted_progs = {p for probe in probes for p in PROGRAMS.get(probe, ())}
            if "blk" in probes:
                wanted_progs.update(BLK_HOOKS[complete_hook])
            if "blk" in probes and filter_tasks:
                wanted_progs.add("blk_getrq")
            if filter_tasks and follow_children:
                wanted_progs.add("follow_fork")
            progs = {}
            prog = lb.bpf_object__next_program(obj, None)
            while prog:
                name = lb.bpf_program__name(prog).decode()
                progs[name] = prog
                lb.bpf_program__set_autoload(prog, name in wanted_progs)
                prog = lb.bpf_object__next_program(obj, prog)
            if not wanted_progs <= set(progs):
                raise Unavailable(f"{path.name} lacks programs {sorted(wanted_progs - set(progs))}: recompile")
            wanted_maps = set(MAPS["common"]) | {m for probe in probes for m in MAPS.get(probe, ())}
            m = lb.bpf_object__next_map(obj, None)
            rodata = None
            while m:
                name = lb.bpf_map__name(m).decode()
                if name.endswith(".rodata"):
                    rodata = m
                elif name in MAP_TYPES:
                    lb.bpf_map__set_autocreate(m, name in wanted_maps)
                m = lb.bpf_object__next_map(obj, m)
            if rodata is None:
                raise Unavailable(f"{path.name} has no .rodata (struct kvds_cfg): recompile")
            cfg = kvds_cfg(filter_tasks, filter_devices, tuple(devices))
            rc = lb.bpf_map__set_initial_value(rodata, ctypes.byref(cfg), ctypes.sizeof(cfg))
            if rc < 0:
                raise _fail(".rodata set-up (struct kvds_cfg size changed?)", rc)
            t1 = time.perf_counter()
            rc = lb.bpf_object__load(obj)
            if rc < 0:
                raise _fail(f"load of {path.name} (verifier)", rc)
            t2 = time.perf_counter()
            for name in sorted(wanted_progs) if attach else ():
                link = lb.bpf_program__attach(progs[name])
                if not link:
                    raise _fail(f"attach of {name}", ctypes.get_errno())
                self._links.append(link)
            t3 = time.perf_counter()
            for name in sorted(wanted_progs):
                self.program_fds[TRACEPOINT_OF[name]] = lb.bpf_program__fd(progs[name])
            self.complete_hook = complete_hook if "blk" in probes else None
            for name in wanted_maps:
                mp = lb.bpf_object__find_map_by_name(obj, name.encode())
                key_t, leaf_t = MAP_TYPES[name]
                ks, vs = lb.bpf_map__key_size(mp), lb.bpf_map__value_size(mp)
                if (ks, vs) != (ctypes.sizeof(key_t), ctypes.sizeof(leaf_t)):
                    raise Unavailable(f"map {name}: object has key/value {ks}/{vs} bytes, loader expects "
                                      f"{ctypes.sizeof(key_t)}/{ctypes.sizeof(leaf_t)}")
                self._tables[name] = Table(name, lb.bpf_map__fd(mp), key_t, leaf_t)
        except BaseException:
            self.cleanup()
            raise
        self.times = LoadTimes(t1 - t0, t2 - t1, t3 - t2)

    def __getitem__(self, name: bytes | str) -> Table:
        key = name.decode() if isinstance(name, bytes) else name
        return self._tables[key]  # KeyError for maps of probe sets not loaded, as bcc does for absent tables

    def cleanup(self) -> None:
        """Detach every program and close the object (its maps go with their last fd)."""
        lb = lib()
        while self._links:
            lb.bpf_link__destroy(self._links.pop())
        self._tables.clear()
        self.program_fds.clear()
        if self._obj:
            lb.bpf_object__close(self._obj)
            self._obj = None
