"""ebpf/net_trace.py on a real lab: two kvds network namespaces joined by a veth pair (journaled), an HTB root on
the prefill side's end when harness.knobs.qdisc has it, TCP streams with two socket priorities through the veth.
Checks what was counted, and where, never how long anything took."""

from __future__ import annotations

import ctypes
import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from harness import doctor, journal
from harness.knobs import create_netns
from harness.knobs import netns as netns_knobs

pytestmark = pytest.mark.timeout(180)
real = doctor.skip_unless("root", "ebpf.libbpf")  # loads net_trace.bpf.c through libbpf, creates namespaces

# Class ids as socket priorities (major 1, minor 0x10 / 0x16: what sch_htb's htb_classify matches directly).
P_FETCH, P_BULK = 0x10016, 0x10010
P_OTHER = 0x10099  # only ever sent on OTHER interfaces: the decode end, loopbacks; must never be counted
FETCH_PORT, BULK_PORT, LO_PORT = 7411, 7412, 7413
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
WAIT_S = 60.0  # a hang guard only; no figure is compared with a time


@contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """This thread inside network namespace `name` (None: stay): sockets created meanwhile stay in it."""
    if name is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(target)


class Lab:
    def __init__(self, tag: str) -> None:
        n = int(tag) % 250 + 1
        self.ns_p, self.ns_d = f"kvds-nt{tag}-p", f"kvds-nt{tag}-d"
        self.if_p, self.if_d = f"kntp{tag}", f"kntd{tag}"
        self.ip_p, self.ip_d = f"10.253.{n}.1", f"10.253.{n}.2"
        self.htb = False

    def build(self, rate_mbit: float = 200.0) -> None:
        """Namespaces, the veth pair, the HTB root: all journaled (restored by the caller's journal session)."""
        create_netns(self.ns_p)
        create_netns(self.ns_d)
        between = getattr(netns_knobs, "create_veth_between", None)
        if between is not None:
            between(self.ns_p, self.if_p, f"{self.ip_p}/30", self.ns_d, self.if_d, f"{self.ip_d}/30")
        else:  # the root-namespace knob, then the prefill end moved into its namespace (removed with it)
            from pyroute2 import IPRoute, NetNS

            netns_knobs.create_veth(self.if_p, self.ns_d, self.if_d, f"{self.ip_p}/30", f"{self.ip_d}/30")
            with IPRoute() as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname=self.if_p)[0], net_ns_fd=self.ns_p)
            with NetNS(self.ns_p) as nsr:
                idx = nsr.link_lookup(ifname=self.if_p)[0]
                nsr.addr("add", index=idx, address=self.ip_p, prefixlen=30)
                nsr.link("set", index=idx, state="up")
        try:
            from harness.knobs.qdisc import HtbClass, install_htb
        except ImportError:
            return  # the veth's default noqueue: every skb still passes net_dev_queue -> net_dev_start_xmit
        install_htb(self.ns_p, self.if_p, rate_mbit, [HtbClass(0x10, rate_mbit / 2, rate_mbit, 1),
                                                      HtbClass(0x16, rate_mbit / 2, rate_mbit, 0)], 0x10)
        self.htb = True

    def set_decode_link(self, up: bool) -> None:
        from pyroute2 import NetNS

        with NetNS(self.ns_d, flags=0) as nsr:
            nsr.link("set", index=nsr.link_lookup(ifname=self.if_d)[0], state="up" if up else "down")

    def assert_removed(self) -> None:
        """The journal put everything back: both namespaces (and with them the pair and its qdisc) are gone."""
        left = {self.ns_p, self.ns_d} & set(netns_knobs.namespaces())
        assert not left, f"still there after restore: {left}"

    def ifindex(self, ns: str, ifname: str) -> int:
        from ebpf.net_trace import ifindex_of

        return ifindex_of(ifname, ns)


def listener(ns: str | None, ip: str, port: int, prio: int) -> socket.socket:
    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, prio)  # SYN-ACKs; accepted sockets inherit it
    s.bind((ip, port))
    s.listen(4)
    return s


def connect(ns: str | None, ip: str, port: int, prio: int) -> socket.socket:
    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, prio)
    s.settimeout(WAIT_S)
    s.connect((ip, port))
    return s


class Stream:
    """One TCP stream: the listener's side sends (its priority), the connecting side receives and counts.

    size: bytes to send; None: send until stop() (the retransmit test flaps the link meanwhile)."""

    def __init__(self, srv_ns: str | None, cli_ns: str | None, ip: str, port: int, prio: int, cli_prio: int,
                 size: int | None) -> None:
        self.lst = listener(srv_ns, ip, port, prio)
        self.cli = connect(cli_ns, ip, self.lst.getsockname()[1], cli_prio)  # port 0: the listener's ephemeral one
        self.conn, _ = self.lst.accept()
        # set on the accepted socket too: on this kernel (6.18) it does NOT inherit the listener's SO_PRIORITY
        # (getsockopt reads 0 and its data left at priority 0), only the SYN-ACK carries the listener's
        self.conn.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, prio)
        self.size, self.received, self.errors = size, 0, []
        self._stop = threading.Event()
        self.sender = threading.Thread(target=self._send, daemon=True)
        self.receiver = threading.Thread(target=self._recv, daemon=True)

    def start(self) -> "Stream":
        self.sender.start()
        self.receiver.start()
        return self

    def _send(self) -> None:
        chunk, sent = b"k" * 65536, 0
        try:
            while (sent < self.size) if self.size is not None else not self._stop.is_set():
                self.conn.sendall(chunk)
                sent += len(chunk)
            self.conn.shutdown(socket.SHUT_WR)
        except OSError as exc:
            self.errors.append(exc)

    def _recv(self) -> None:
        try:
            self.cli.sendall(b"GET")  # a request on the decode side's egress, at the client's priority
            while data := self.cli.recv(1 << 20):
                self.received += len(data)
        except OSError as exc:
            self.errors.append(exc)

    def wait_received(self, at_least: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while self.received < at_least:
            assert time.monotonic() < deadline and not self.errors, (self.received, self.errors)
            time.sleep(0.01)

    def finish(self) -> None:
        self._stop.set()
        self.sender.join(WAIT_S)
        self.receiver.join(WAIT_S)
        assert not self.sender.is_alive() and not self.receiver.is_alive(), "stream did not finish"
        for s in (self.conn, self.cli, self.lst):
            s.close()
        assert not self.errors, self.errors


def snmp_tcp(ns: str) -> dict[str, int]:
    """The namespace's Tcp: counters (/proc/thread-self/net/snmp is this thread's namespace)."""
    with in_netns(ns):
        lines = [ln.split() for ln in open("/proc/thread-self/net/snmp").read().splitlines() if ln.startswith("Tcp:")]
    return dict(zip(lines[0][1:], map(int, lines[1][1:])))


def assert_bucket_layout(q: dict) -> None:
    """max_ns is exact; it must lie in the highest non-empty log2 bucket as ebpf/hist.py bounds it."""
    from ebpf import hist as H

    b = q["hist"]["buckets"]
    top = max(i for i, n in enumerate(b) if n)
    lo, hi = H.bounds(top)
    assert lo <= q["max_ns"] <= hi, (q["max_ns"], top, (lo, hi))
    assert q["p50_ns"][0] <= q["p99_ns"][0] and q["p99_ns"][1] <= hi


def _tag() -> str:
    return f"{os.getpid() % 10000}{threading.get_ident() % 10}"[-5:]


def test_arguments_and_class_names() -> None:
    from harness.errors import UserError

    from ebpf.net_trace import NetTrace, class_id, netns_inode

    assert class_id(0x1000A) == "1:a" and class_id(0x10016) == "1:16" and class_id(6) is None
    assert netns_inode(None) == os.stat("/proc/self/ns/net").st_ino
    nt = NetTrace("lo", ports=[7301])
    assert nt.ifindex == 1 and nt.netns_ino == netns_inode(None) and list(nt.tcp_netns) == [nt.netns_ino]
    assert NetTrace(ifindex=1, tcp_netns=()).tcp_netns == {}
    assert nt.cfg().key == 0 and NetTrace("lo", key="dscp").cfg().key == 1  # net_cfg.key: priority, or the DSCP
    for bad in (dict(), dict(ifname="lo", ports=[0]), dict(ifname="lo", key="tos"), dict(ifname="lo", ports=range(1, 18)),
                dict(ifname="lo", ifindex=99999), dict(ifname="kvds-no-such-if"), dict(ifname="lo", hook="kprobe"),
                dict(ifname="lo", netns="kvds-no-such-ns")):
        with pytest.raises(UserError):
            NetTrace(**bad)


@real
@pytest.mark.parametrize("hook", ["tp_btf", "tracepoint"])
def test_queue_delay_per_priority_on_one_interface(hook: str) -> None:
    from ebpf.net_trace import NetTrace, netns_inode

    lab = Lab(_tag())
    with journal.session():
        lab.build()
        streams: list[Stream] = []
        with NetTrace(lab.if_p, netns=lab.ns_p, ports=[FETCH_PORT, BULK_PORT], hook=hook) as nt:
            # the lab: two priorities leaving the prefill end, concurrently (the HTB root makes them wait)
            streams.append(Stream(lab.ns_p, lab.ns_d, lab.ip_p, FETCH_PORT, P_FETCH, P_OTHER, 2 << 20))
            streams.append(Stream(lab.ns_p, lab.ns_d, lab.ip_p, BULK_PORT, P_BULK, P_OTHER, 4 << 20))
            # P_OTHER elsewhere: the prefill namespace's loopback (same namespace, other ifindex), the decode end
            # (the clients' requests and ACKs: other namespace; a fresh namespace's veth end often has the same
            # ifindex as its peer), the root namespace's loopback (ifindex 1, as the lab's lo)
            streams.append(Stream(lab.ns_p, lab.ns_p, "127.0.0.1", LO_PORT, P_OTHER, P_OTHER, 1 << 20))
            streams.append(Stream(None, None, "127.0.0.1", 0, P_OTHER, P_OTHER, 1 << 20))
            for s in streams:
                s.start()
            for s in streams:
                s.finish()
            if lab.htb:
                from harness.knobs.qdisc import qdisc_stats

                classes = qdisc_stats(lab.ns_p, lab.if_p)["classes"]
        res = nt.results()
        same_ifindex = lab.ifindex(lab.ns_p, lab.if_p) == lab.ifindex(lab.ns_d, lab.if_d)
        ino_p = netns_inode(lab.ns_p)
    lab.assert_removed()
    assert res["hook"] == hook and res["interface"]["netns_ino"] == ino_p != netns_inode(None)
    assert res["interface"]["ifindex"] != 1 and res["detail"] == ""  # no fall-back from the hook asked for
    q = res["queue_delay_ns"]
    for prio in (P_FETCH, P_BULK):
        assert prio in q and q[prio]["count"] > 0, (prio, sorted(q))
        assert q[prio]["bytes"] > (1 << 20), q[prio]  # the stream's data left through this class
        assert q[prio]["class"] == f"1:{prio & 0xFFFF:x}"
        assert_bucket_layout(q[prio])
    # Nothing from another interface: P_OTHER left through lo (same namespace), the decode end (other namespace,
    # often the same ifindex: same_ifindex says) and the root namespace's lo, never through the timed one.
    assert P_OTHER not in q and P_OTHER not in res["queue_accounting"], (same_ifindex, sorted(q))
    for prio, a in res["queue_accounting"].items():
        assert a["queued"] == a["timed"] + a["unfinished"] + a["overwritten"] + a["lost"], (prio, a)
        assert a["lost"] == 0, (prio, a)
    if lab.htb:  # the priority we keyed on is the class HTB served
        for prio in (P_FETCH, P_BULK):
            assert classes[f"1:{prio & 0xFFFF:x}"]["packets"] > 0


@real
@pytest.mark.parametrize("hook", ["tp_btf", "tracepoint"])
def test_retransmits_per_priority_after_a_link_flap(hook: str) -> None:
    """Both streams are sending when the decode end goes down: what was in flight or queued is lost and must be
    retransmitted once it is up again (the streams then deliver more), so each priority has retransmits."""
    from ebpf.net_trace import NetTrace

    lab = Lab(_tag())
    with journal.session():
        lab.build()
        before = snmp_tcp(lab.ns_p)
        with NetTrace(lab.if_p, netns=lab.ns_p, ports=[FETCH_PORT, BULK_PORT], tcp_netns=[lab.ns_p, lab.ns_d],
                      tcp_probe=True, hook=hook) as nt:
            streams = [Stream(lab.ns_p, lab.ns_d, lab.ip_p, FETCH_PORT, P_FETCH, P_OTHER, None).start(),
                       Stream(lab.ns_p, lab.ns_d, lab.ip_p, BULK_PORT, P_BULK, P_OTHER, None).start()]
            for s in streams:
                s.wait_received(1 << 20)
            lab.set_decode_link(False)
            try:
                time.sleep(0.3)  # longer than nothing; how long does not matter for what is asserted
            finally:
                lab.set_decode_link(True)
            marks = [s.received for s in streams]
            for s, m in zip(streams, marks):
                s.wait_received(m + (1 << 20))  # recovered: the lost bytes were sent again
            for s in streams:
                s.finish()
        after = snmp_tcp(lab.ns_p)
    lab.assert_removed()
    res = nt.results()
    rtx = res["retransmits"]
    for prio in (P_FETCH, P_BULK):
        assert rtx["by_priority"].get(prio, {}).get("retransmits", 0) > 0, rtx
    for f in rtx["flows"]:
        assert f["sport"] in (FETCH_PORT, BULK_PORT) or f["dport"] in (FETCH_PORT, BULK_PORT), f
        assert f["netns"] in (lab.ns_p, lab.ns_d), f
        if f["netns"] == lab.ns_p:
            assert f["priority"] == {FETCH_PORT: P_FETCH, BULK_PORT: P_BULK}[f["sport"]], f
    # one event per retransmitted skb (>= 1 segment each), all of them in the prefill namespace's RetransSegs
    ours = sum(f["retransmits"] for f in rtx["flows"] if f["netns"] == lab.ns_p)
    assert 0 < ours <= after["RetransSegs"] - before["RetransSegs"], (ours, before["RetransSegs"], after["RetransSegs"])
    # tcp_probe: the senders (prefill, receiving ACKs) at their class, the receivers (decode) at P_OTHER
    flows = res["tcp_probe"]["flows"]
    sides = {(f["netns"], f["priority"]) for f in flows if f["samples"] > 0}
    assert {(lab.ns_p, P_FETCH), (lab.ns_p, P_BULK), (lab.ns_d, P_OTHER)} <= sides, sides
    srtt = res["tcp_probe"]["srtt_us"]
    from ebpf import hist as H

    for prio, h in srtt.items():
        top = max(i for i, n in enumerate(h["hist"]["buckets"]) if n)
        worst = max(f["srtt_us"]["max"] for f in flows if f["priority"] == prio)
        assert H.bounds(top)[0] <= worst <= H.bounds(top)[1], (prio, worst, top)
