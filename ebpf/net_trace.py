"""A kernel-side view of the delivery track's traffic (net_priority), per socket priority (= HTB class id).

    from ebpf.net_trace import NetTrace
    with NetTrace("kvp7", netns="kvds-net-7-p", ports=[7301, 7302]) as nt:   # net_priority/veth_lab.py ports
        run_the_transfer()
    res = nt.results()          # the same dict stop() returned

Programs: ebpf/bpf_src/net_trace.bpf.c, compiled once against the running kernel's BTF (ebpf/objects.build,
cached like kvds.bpf.c) and loaded through libbpf (ebpf/libbpf_loader's ctypes binding). The programs read
struct sk_buff / net_device / sock; every offset is CO-RE relocated against the running kernel.

Shape of stop() / results() (priorities, errnos are int keys; json.dumps writes them as strings):

    {"interface": {"ifname": "kvp7", "ifindex": 2, "netns": "kvds-net-7-p", "netns_ino": 4026532291},
     "hook": "tp_btf", "detail": "", "duration_s": 3.2, "load_attach_s": 0.04,
     "filters": {"ports": [7301, 7302], "tcp_netns": ["kvds-net-7-p"]},
     "queue_delay_ns": {65546: {"class": "1:a", "hist": {"unit": "ns", "buckets": [...], "count": 88},
                                "count": 88, "bytes": 4200120, "mean_ns": 16139848.2, "max_ns": 25458538,
                                "p50_ns": [16777216, 33554431], "p99_ns": [16777216, 33554431]}, ...},
     "queue_accounting": {65546: {"queued": 88, "timed": 88, "unfinished": 0, "overwritten": 0, "untimed": 0,
                                  "lost": 0}, ...},
     "retransmits": {"by_priority": {65546: {"class": "1:a", "retransmits": 18, "failed": 0, "failed_by_err": {}}},
                     "flows": [{"netns": "kvds-net-7-p", "priority": 65546, "sport": 7302, "dport": 37120,
                                "retransmits": 18, "failed": 0, "failed_by_err": {}}]},
     "missed_events": {"net/net_dev_queue": 0, ...},
     "tcp_probe": {"flows": [{"netns", "sport", "dport", "priority", "samples",
                              "srtt_us": {"min", "mean", "max", "last"}, "snd_cwnd": {"min", "mean", "max", "last"}}],
                   "srtt_us": {65546: {"class", "hist" (unit usecs), "count", "p50_us", "p99_us"}}}}   # tcp_probe=True

A histogram is ebpf/hist.py's {"unit", "buckets", "count"}: bucket k holds [2^(k-1), 2^k - 1] (bucket 1: 0-1);
the kernel computes bcc's slot = floor(log2(v)) + 1 for exactly that layout, so H.bounds / H.percentile_bounds
are right.

What each figure is, exactly:
- queue_delay_ns[prio]: per skb leaving ONE device (ifindex + the inode of its network namespace, both compared
  as constants in the kernel: ifindex alone is per namespace, and a fresh namespace's first veth is ifindex 2 in
  every namespace), the time from tracepoint net:net_dev_queue (in __dev_queue_xmit, after the tx queue is picked,
  before the qdisc's enqueue) to net:net_dev_start_xmit (xmit_one, just before the driver's ndo_start_xmit), paired
  by skb address, keyed by skb->priority read at net_dev_queue (the value HTB's classify compares with class
  ids); with key="dscp", by the IPv4 header's DSCP instead (what u32 filters on the DSCP field classify by, as
  `kvds net bench --classify dscp` does; 0xffff for a packet that is not IPv4; "class" is then None and "key"
  says "dscp"). It includes the qdisc enqueue, the wait in the qdisc (HTB shaping, other classes served first),
  dequeue and validate_xmit_skb; on a noqueue device (lo, a bare veth) it is the direct path: 0.25-8 us measured on lo
  here. Percentiles are log2 bucket
  bounds ([low, high] of the bucket that holds the percentile, as ebpf/hist.py computes them), never points;
  mean_ns and max_ns are exact (per-CPU sums and maxima).
- queue_accounting[prio]: queued (net_dev_queue events) = timed + unfinished + overwritten + lost; unfinished: still
  in the in-flight map at stop (in the qdisc then, or dropped by it and never reused); overwritten: a later skb at
  the same address replaced an entry that never reached start_xmit (dropped by the qdisc, or segmented into new
  skbs); untimed: start_xmit without a queue entry (queued before start, requeued, or bypassing the qdisc layer).
- retransmits: tcp:tcp_retransmit_skb events (one per retransmitted skb, which may carry several MSS-sized
  segments, so this is <= the namespace's RetransSegs), keyed by the socket's namespace, sk->sk_priority (read from
  the socket at the event; __tcp_transmit_skb copies it into the retransmitted skb's priority, so it is the class
  the retransmission was queued in unless SO_PRIORITY changed meanwhile), local and remote port (from the socket,
  host order). Kept: sockets in the chosen namespaces (default: the device's) and, when ports are given, whose
  local or remote port is one of them. On this kernel (6.18) the event carries the attempt's result (err); events
  with err != 0 (an attempt that sent nothing) are counted apart as "failed" (none were seen in the tests).
- tcp_probe (tcp_probe=True): tcp:tcp_probe fires in tcp_rcv_established for every segment a socket receives
  (ACKs on the sender, data on the receiver): samples, srtt (tp->srtt_us >> 3, in us) and snd_cwnd (segments)
  min/mean/max/last per flow, and a log2 srtt histogram per priority (one sample per received segment).
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any, Sequence

from harness.errors import Unavailable, UserError

from ebpf import hist as H
from ebpf import libbpf_loader as L
from ebpf.bpf_structs import MAX_NETNS, MAX_PORTS, NET_MAP_TYPES, NetCfg, c_u16, c_u32

HOOKS = ("tp_btf", "tracepoint")
QUEUE_KEYS = ("priority", "dscp")  # net_cfg.key: queue delay per skb->priority, or per IPv4 DSCP (0xffff: not IPv4)
HOOK_ENV = "KVDS_NET_TRACE_HOOK"  # "tp_btf" (default; falls back to tracepoint when it does not load) or "tracepoint"
NQ_WHAT = ("queued", "untimed", "overwritten", "lost")  # nq_acct codes

PERCPU_MAPS = {"nq_stats"}
# Programs per hook and event group; the tracepoint each reports on (missed_events keys).
PROGRAMS = {
    "tp_btf": {"queue": ("nd_queue_btf", "nd_xmit_btf"), "retransmits": ("tcp_rtx_btf",), "probe": ("tcp_probe_btf",)},
    "tracepoint": {"queue": ("nd_queue_tp", "nd_xmit_tp"), "retransmits": ("tcp_rtx_tp",), "probe": ("tcp_probe_tp",)},
}
TRACEPOINT_OF = {
    "nd_queue_btf": "net/net_dev_queue", "nd_queue_tp": "net/net_dev_queue",
    "nd_xmit_btf": "net/net_dev_start_xmit", "nd_xmit_tp": "net/net_dev_start_xmit",
    "tcp_rtx_btf": "tcp/tcp_retransmit_skb", "tcp_rtx_tp": "tcp/tcp_retransmit_skb",
    "tcp_probe_btf": "tcp/tcp_probe", "tcp_probe_tp": "tcp/tcp_probe",
}


def class_id(prio: int) -> str | None:
    """tc's notation (hex major:minor) of a priority that names a class (major != 0), else None."""
    return f"{prio >> 16:x}:{prio & 0xFFFF:x}" if prio >> 16 else None


# ---- namespaces and interfaces ---------------------------------------------------------------------------------
def netns_inode(netns: str | None = None) -> int:
    """The nsfs inode (= the kernel's net->ns.inum) of a named namespace (/run/netns/<name>), of a path to an
    nsfs file (/proc/<pid>/ns/net), or of this thread's namespace (None)."""
    if netns is None:
        path = "/proc/thread-self/ns/net"
    elif "/" in netns:
        path = netns
    else:
        path = f"/run/netns/{netns}"
    try:
        return os.stat(path).st_ino
    except OSError as exc:
        raise UserError(f"network namespace {netns or '(current)'}: {path}: {exc.strerror}") from None


def ifindex_of(ifname: str, netns: str | None = None) -> int:
    """The ifindex of an interface inside a network namespace (None: this process's)."""
    from pyroute2 import IPRoute, NetNS

    if netns is not None and "/" in netns:
        raise UserError(f"give the namespace by name (/run/netns), or pass ifindex= with netns_ino=: {netns}")
    ipr = NetNS(netns) if netns else IPRoute()
    try:
        found = ipr.link_lookup(ifname=ifname)
    finally:
        ipr.close()
    if not found:
        raise UserError(f"no interface {ifname} in network namespace {netns or '(current)'}")
    return int(found[0])


# ---- the object ----------------------------------------------------------------------------------------------
class PercpuTable(L.Table):
    """A per-CPU hash: items() gives (key, [one leaf per possible CPU])."""

    def __init__(self, name: str, fd: int, key_t: type, leaf_t: type, ncpus: int) -> None:
        super().__init__(name, fd, key_t, leaf_t)
        self.ncpus = ncpus

    def items(self) -> list[tuple[Any, Any]]:
        stride = (ctypes.sizeof(self.Leaf) + 7) & ~7
        buf = (ctypes.c_uint8 * (stride * self.ncpus))()
        out = []
        for k in self.keys():
            if L.lib().bpf_map_lookup_elem(self.fd, ctypes.byref(k), buf) == 0:
                out.append((k, [self.Leaf.from_buffer_copy(buf, i * stride) for i in range(self.ncpus)]))
        return out


def possible_cpus() -> int:
    fn = L.lib().libbpf_num_possible_cpus
    fn.restype, fn.argtypes = ctypes.c_int, []
    n = fn()
    if n <= 0:
        raise Unavailable(f"libbpf_num_possible_cpus failed ({n})")
    return n


class NetObject:
    """net_trace.bpf.o opened, configured (.rodata), loaded and attached; only the chosen programs load."""

    def __init__(self, path: Path, programs: Sequence[str], cfg: NetCfg, attach: bool = True) -> None:
        lb = L.lib()
        self._links: list[int] = []
        self.tables: dict[str, L.Table] = {}
        self.program_fds: dict[str, int] = {}
        obj = lb.bpf_object__open_file(str(path).encode(), None)
        if not obj:
            raise L._fail(f"open of {path}", ctypes.get_errno())
        self._obj: int | None = obj
        try:
            wanted = set(programs)
            progs = {}
            prog = lb.bpf_object__next_program(obj, None)
            while prog:
                name = lb.bpf_program__name(prog).decode()
                progs[name] = prog
                lb.bpf_program__set_autoload(prog, name in wanted)
                prog = lb.bpf_object__next_program(obj, prog)
            if not wanted <= set(progs):
                raise Unavailable(f"{path.name} lacks programs {sorted(wanted - set(progs))}: recompile")
            rodata = None
            m = lb.bpf_object__next_map(obj, None)
            while m:
                if lb.bpf_map__name(m).decode().endswith(".rodata"):
                    rodata = m
                m = lb.bpf_object__next_map(obj, m)
            if rodata is None:
                raise Unavailable(f"{path.name} has no .rodata (struct net_cfg): recompile")
            rc = lb.bpf_map__set_initial_value(rodata, ctypes.byref(cfg), ctypes.sizeof(cfg))
            if rc < 0:
                raise L._fail(".rodata set-up (struct net_cfg size changed?)", rc)
            rc = lb.bpf_object__load(obj)
            if rc < 0:
                raise L._fail(f"load of {path.name} (verifier)", rc)
            for name in sorted(wanted):
                self.program_fds[name] = lb.bpf_program__fd(progs[name])
            ncpus = possible_cpus()
            for name, (key_t, leaf_t) in NET_MAP_TYPES.items():
                mp = lb.bpf_object__find_map_by_name(obj, name.encode())
                ks, vs = lb.bpf_map__key_size(mp), lb.bpf_map__value_size(mp)
                if (ks, vs) != (ctypes.sizeof(key_t), ctypes.sizeof(leaf_t)):
                    raise Unavailable(f"map {name}: object has key/value {ks}/{vs} bytes, loader expects "
                                      f"{ctypes.sizeof(key_t)}/{ctypes.sizeof(leaf_t)}")
                fd = lb.bpf_map__fd(mp)
                self.tables[name] = (PercpuTable(name, fd, key_t, leaf_t, ncpus) if name in PERCPU_MAPS
                                     else L.Table(name, fd, key_t, leaf_t))
            for name in sorted(wanted) if attach else ():
                link = lb.bpf_program__attach(progs[name])
                if not link:
                    raise L._fail(f"attach of {name}", ctypes.get_errno())
                self._links.append(link)
        except BaseException:
            self.close()
            raise

    def detach(self) -> None:
        """Stop every program (the maps stay readable until close())."""
        lb = L.lib()
        while self._links:
            lb.bpf_link__destroy(self._links.pop())

    def close(self) -> None:
        self.detach()
        self.tables.clear()
        self.program_fds.clear()
        if self._obj:
            L.lib().bpf_object__close(self._obj)
            self._obj = None


def parse_hook(text: str | None) -> str:
    value = (text if text is not None else os.environ.get(HOOK_ENV, "tp_btf")).strip().lower()
    if value not in HOOKS:
        raise UserError(f"{HOOK_ENV}/hook {value!r}: choose from {', '.join(HOOKS)}")
    return value


# ---- the session -----------------------------------------------------------------------------------------------
class NetTrace:
    """Per-priority qdisc queueing delay on one interface, TCP retransmits (and optionally tcp_probe) of the lab.

    ifname / ifindex: the interface whose egress is timed; netns: the network namespace it lives in (a name under
    /run/netns; None = this process's). Give ifname (ifindex is then looked up in netns, and checked when also
    given), or ifindex with netns or netns_ino (the nsfs inode, e.g. os.stat("/run/netns/X").st_ino).
    ports: TCP ports of the lab (an event is kept when its local or remote port is one of them; empty = any port).
    tcp_netns: namespaces (names or inodes) whose sockets' TCP events are kept; None = the interface's namespace,
    () = any namespace (then only `ports` filter: tracepoints are global).
    tcp_probe: also record tcp:tcp_probe (one program run per received segment of every socket on the host).
    hook: "tp_btf" (default; falls back to the classic tracepoints if tp_btf does not load) or "tracepoint";
    None reads $KVDS_NET_TRACE_HOOK.
    Needs root. Kernel state: the BPF programs (they go with their file descriptors at stop or exit); the
    tracepoint hook also mounts tracefs when it is not mounted, through the caller's knob journal (as
    ebpf/recorder.py does), so it is unmounted when that journal restores.
    """

    def __init__(self, ifname: str | None = None, ifindex: int | None = None, ports: Sequence[int] = (), *,
                 netns: str | None = None, netns_ino: int | None = None,
                 tcp_netns: Sequence[str | int] | None = None, tcp_probe: bool = False,
                 hook: str | None = None, key: str = "priority") -> None:
        if key not in QUEUE_KEYS:
            raise UserError(f"NetTrace key must be one of {', '.join(QUEUE_KEYS)}, not {key!r}")
        self.key = key
        if ifname is None and ifindex is None:
            raise UserError("NetTrace needs an interface: ifname (with netns) or ifindex (with netns or netns_ino)")
        self.netns = netns
        self.netns_ino = netns_ino if netns_ino is not None else netns_inode(netns)
        if netns_ino is not None and netns is not None and netns_inode(netns) != netns_ino:
            raise UserError(f"netns {netns} has inode {netns_inode(netns)}, not netns_ino={netns_ino}")
        own_ns = netns is None and self.netns_ino == netns_inode(None)
        if ifname is not None and (netns is not None or own_ns):  # a namespace we can look into by name
            found = ifindex_of(ifname, netns)
            if ifindex is not None and ifindex != found:
                raise UserError(f"{ifname} in {netns or 'this namespace'} is ifindex {found}, not {ifindex}")
            ifindex = found
        if ifindex is None:
            raise UserError(f"netns_ino={netns_ino} without a namespace name: pass ifindex= as well")
        self.ifname, self.ifindex = ifname, int(ifindex)
        self.ports = tuple(dict.fromkeys(int(p) for p in ports))
        if len(self.ports) > MAX_PORTS or any(not 0 < p < 65536 for p in self.ports):
            raise UserError(f"ports: at most {MAX_PORTS} TCP ports in 1-65535, got {list(self.ports)}")
        names: dict[int, str | None] = {self.netns_ino: netns} if tcp_netns is None else {}
        for ns in tcp_netns or ():
            names[ns if isinstance(ns, int) else netns_inode(ns)] = None if isinstance(ns, int) else ns
        if len(names) > MAX_NETNS:
            raise UserError(f"tcp_netns: at most {MAX_NETNS} namespaces")
        self.tcp_netns = names
        self.tcp_probe = tcp_probe
        self.hook_choice = parse_hook(hook)
        self.hook: str | None = None
        self.detail = ""
        self.obj: NetObject | None = None
        self.load_seconds: float | None = None
        self.compile_seconds: float | None = None
        self.started_at: float | None = None
        self.duration_s: float | None = None
        self._results: dict[str, Any] | None = None

    def cfg(self) -> NetCfg:
        ports = (c_u16 * MAX_PORTS)(*self.ports)
        inos = (c_u32 * MAX_NETNS)(*self.tcp_netns)
        return NetCfg(self.ifindex, self.netns_ino, len(self.ports), len(self.tcp_netns), ports, inos,
                      QUEUE_KEYS.index(self.key))

    def programs(self, hook: str) -> list[str]:
        groups = ("queue", "retransmits") + (("probe",) if self.tcp_probe else ())
        return [p for g in groups for p in PROGRAMS[hook][g]]

    # ---- life cycle --------------------------------------------------------------------------------------------
    def start(self) -> "NetTrace":
        if os.geteuid() != 0:
            raise UserError("NetTrace needs root (it loads BPF programs)")
        if self.obj is not None or self._results is not None:
            raise UserError("a NetTrace starts once")
        from ebpf import objects
        from harness.knobs import ensure_tracefs

        t0 = time.perf_counter()
        path, self.compile_seconds = objects.build(objects.NET_SOURCE)
        try:
            if self.hook_choice == "tracepoint":
                ensure_tracefs()  # libbpf finds a classic tracepoint's id in tracefs
            self.obj = NetObject(path, self.programs(self.hook_choice), self.cfg())
            self.hook = self.hook_choice
        except Unavailable as exc:
            if self.hook_choice == "tracepoint":
                raise
            ensure_tracefs()
            self.obj = NetObject(path, self.programs("tracepoint"), self.cfg())
            self.hook = "tracepoint"
            self.detail = f"classic tracepoints (tp_btf failed: {exc})"
        self.load_seconds = time.perf_counter() - t0 - self.compile_seconds
        self.started_at = time.monotonic()
        return self

    def stop(self) -> dict[str, Any]:
        """Detach, snapshot the maps, unload; returns the results (also results() afterwards)."""
        if self._results is not None:
            return self._results
        if self.obj is None:
            raise UserError("NetTrace.stop() before start()")
        self.duration_s = time.monotonic() - (self.started_at or time.monotonic())
        snap: dict[str, list[tuple[Any, Any]]] = {}
        try:
            self.obj.detach()  # first: the snapshot is then one consistent instant
            missed = {}
            for name, fd in self.obj.program_fds.items():
                n = L.recursion_misses(fd)
                if n is not None:
                    missed[TRACEPOINT_OF[name]] = missed.get(TRACEPOINT_OF[name], 0) + n
            for name, table in self.obj.tables.items():
                snap[name] = table.items()
        finally:
            self.obj.close()
            self.obj = None
        self._results = self._build(snap, missed)
        return self._results

    def results(self) -> dict[str, Any]:
        if self._results is None:
            raise UserError("results() is available after stop()")
        return self._results

    def __enter__(self) -> "NetTrace":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.obj is not None:
            self.stop()

    # ---- results -----------------------------------------------------------------------------------------------
    def _ns_name(self, ino: int) -> str | int:
        name = self.tcp_netns.get(ino) or (self.netns if ino == self.netns_ino else None)
        return name if name else ino

    def _build(self, snap: dict[str, list[tuple[Any, Any]]], missed: dict[str, int]) -> dict[str, Any]:
        hists: dict[int, H.Hist] = {}
        for k, v in snap.get("nq_hist", []):
            H.add(hists.setdefault(k.prio, H.new_hist("ns")), k.slot, v.value)
        stats: dict[int, dict[str, int]] = {}
        for k, per_cpu in snap.get("nq_stats", []):
            stats[k.value] = {"count": sum(s.count for s in per_cpu), "bytes": sum(s.bytes for s in per_cpu),
                              "sum_ns": sum(s.sum_ns for s in per_cpu),
                              "max_ns": max((s.max_ns for s in per_cpu), default=0)}
        acct: dict[int, dict[str, int]] = {}

        def entry(prio: int) -> dict[str, int]:
            return acct.setdefault(prio, {"queued": 0, "timed": 0, "unfinished": 0, "overwritten": 0,
                                          "untimed": 0, "lost": 0})

        for k, v in snap.get("nq_acct", []):
            entry(k.prio)[NQ_WHAT[k.what]] += v.value
        for _k, v in snap.get("nq_inflight", []):
            entry(v.prio)["unfinished"] += 1
        queue: dict[int, Any] = {}
        for prio in sorted(set(hists) | set(stats)):
            h = hists.get(prio, H.new_hist("ns"))
            st = stats.get(prio, {"count": 0, "bytes": 0, "sum_ns": 0, "max_ns": 0})
            entry(prio)["timed"] = h["count"]
            p50, p99 = H.percentile_bounds(h, 50), H.percentile_bounds(h, 99)
            queue[prio] = {"class": class_id(prio) if self.key == "priority" else None, "hist": h,
                           "count": h["count"], "bytes": st["bytes"],
                           "mean_ns": round(st["sum_ns"] / st["count"], 1) if st["count"] else None,
                           "max_ns": st["max_ns"] if st["count"] else None,
                           "p50_ns": list(p50) if p50 else None, "p99_ns": list(p99) if p99 else None}
        out: dict[str, Any] = {
            "interface": {"ifname": self.ifname, "ifindex": self.ifindex, "netns": self.netns,
                          "netns_ino": self.netns_ino},
            "key": self.key, "hook": self.hook, "detail": self.detail, "duration_s": round(self.duration_s or 0.0, 3),
            "load_attach_s": None if self.load_seconds is None else round(self.load_seconds, 4),
            "filters": {"ports": list(self.ports),
                        "tcp_netns": [self._ns_name(i) for i in self.tcp_netns] if self.tcp_netns else "any"},
            "queue_delay_ns": queue,
            "queue_accounting": {p: acct[p] for p in sorted(acct)},
            "retransmits": self._build_retransmits(snap),
            "missed_events": missed,
        }
        if self.tcp_probe:
            out["tcp_probe"] = self._build_probe(snap)
        return out

    def _build_retransmits(self, snap: dict[str, list[tuple[Any, Any]]]) -> dict[str, Any]:
        by_prio: dict[int, dict[str, Any]] = {}
        flows: dict[tuple[int, int, int, int], dict[str, Any]] = {}
        for k, v in snap.get("rtx_counts", []):
            for rec in (by_prio.setdefault(k.prio, {"class": class_id(k.prio), "retransmits": 0, "failed": 0,
                                                    "failed_by_err": {}}),
                        flows.setdefault((k.netns, k.prio, k.sport, k.dport),
                                         {"netns": self._ns_name(k.netns), "priority": k.prio, "sport": k.sport,
                                          "dport": k.dport, "retransmits": 0, "failed": 0, "failed_by_err": {}})):
                if k.err == 0:
                    rec["retransmits"] += v.value
                else:
                    rec["failed"] += v.value
                    rec["failed_by_err"][k.err] = rec["failed_by_err"].get(k.err, 0) + v.value
        return {"by_priority": {p: by_prio[p] for p in sorted(by_prio)},
                "flows": [flows[f] for f in sorted(flows)]}

    def _build_probe(self, snap: dict[str, list[tuple[Any, Any]]]) -> dict[str, Any]:
        hists: dict[int, H.Hist] = {}
        for k, v in snap.get("probe_srtt_hist", []):
            H.add(hists.setdefault(k.prio, H.new_hist("usecs")), k.slot, v.value)
        flows = []
        for k, v in sorted(snap.get("probe_flows", []), key=lambda kv: (kv[0].netns, kv[0].sport, kv[0].dport)):
            n = v.samples
            flows.append({"netns": self._ns_name(k.netns), "sport": k.sport, "dport": k.dport, "priority": v.prio,
                          "samples": n,
                          "srtt_us": {"min": v.srtt_min_us, "mean": round(v.srtt_sum_us / n, 1), "max": v.srtt_max_us,
                                      "last": v.srtt_last_us},
                          "snd_cwnd": {"min": v.cwnd_min, "mean": round(v.cwnd_sum / n, 1), "max": v.cwnd_max,
                                       "last": v.cwnd_last}})
        by_prio = {}
        for prio in sorted(hists):
            h = hists[prio]
            p50, p99 = H.percentile_bounds(h, 50), H.percentile_bounds(h, 99)
            by_prio[prio] = {"class": class_id(prio), "hist": h, "count": h["count"],
                             "p50_us": list(p50) if p50 else None, "p99_us": list(p99) if p99 else None}
        return {"flows": flows, "srtt_us": by_prio}


def format_results(res: dict[str, Any]) -> str:
    """Text for a report: one biolatency-style histogram per priority, accounting and retransmit counts."""
    itf = res["interface"]
    lines = [f"qdisc queueing delay on {itf['ifname'] or itf['ifindex']} (netns {itf['netns'] or itf['netns_ino']}),"
             f" net_dev_queue -> net_dev_start_xmit, {res['duration_s']} s, hook {res['hook']}"]
    for prio, q in res["queue_delay_ns"].items():
        label = f"priority {prio}" + (f" (class {q['class']})" if q["class"] else "")
        lines.append(H.format_log2(q["hist"], label))
        lines.append(f"     mean {q['mean_ns']} ns, max {q['max_ns']} ns, {q['bytes']} bytes")
    for prio, a in res["queue_accounting"].items():
        lines.append(f"priority {prio}: " + ", ".join(f"{k} {v}" for k, v in a.items()))
    rtx = res["retransmits"]["by_priority"]
    lines.append("retransmits: " + (", ".join(f"priority {p}: {r['retransmits']} (failed attempts {r['failed']})"
                                              for p, r in rtx.items()) or "none"))
    return "\n".join(lines)
