"""Journaled traffic control inside kvds's network namespaces (the delivery track's bottleneck, net_priority).

Everything goes through netlink (pyroute2), never the `tc` binary. A root qdisc is installed only on a link of a
kvds namespace (`kvds-*`) whose root is still the link's default (handle 0: noqueue, pfifo_fast, mq); restore
deletes that root (and with it every class under it) when it is still the one kvds installed.

HTB: the root `1:` (default class 1:<default_minor>), one parent class 1:1 at the link rate (rate = ceil) and the
leaf classes 1:<minor> under it, each with the kernel's default leaf queue (pfifo). HTB classifies a packet
whose skb->priority equals a class id of the qdisc directly, without a filter (net/sched/sch_htb.c,
htb_classify), so a socket whose SO_PRIORITY is `htb_priority(minor)` sends into class 1:<minor>. Quantum (the
DRR share among classes of one prio) is given for every class, proportional to its rate: left to the kernel it is
rate / r2q, capped at 200000 bytes with the warning "quantum of class ... is big" at Gbit rates (an extack message
on 6.x kernels, dmesg before).

Leaves: a class's (HTB) or TBF's inner queue may be replaced by a `Leaf`: `fq` (enforces each socket's pacing rate,
SO_MAX_PACING_RATE and TCP's own, instead of TCP pacing itself) or `netem` (random loss on the path, no delay, the
queue limit of the pfifo it replaces). A leaf is installed in the same journaled step as its root and goes with it
(deleting a root deletes its tree).
`install_netem` puts a netem root (delay, loss) on a link: the lab's return path, where it adds its delay to every
round trip without touching the classified path.

Class ids in `qdisc_stats` are written as tc writes them: hexadecimal minor, so minor 10 is "1:a".
"""

from __future__ import annotations

import errno
import math
from dataclasses import dataclass
from typing import Any, Sequence

from harness.errors import KnobRefused, UserError
from harness.journal import Journal, get_journal, undo_handler
from harness.knobs.netns import check_ifname, namespaces, require_kvds_netns, safe_children

TC_H_ROOT = 0xFFFFFFFF
ROOT_HANDLE = 0x10000          # "1:"
PARENT_MINOR = 1               # the HTB parent class 1:1 every leaf hangs under
MAX_MINOR = 0xFFFF
HTB_PRIOS = 8                  # TC_HTB_NUMPRIO: prio 0 (served first) .. 7
PARENT_QUANTUM = 60_000        # bytes: the parent's quantum; leaves get theirs in proportion to their rates
MIN_QUANTUM = 1_600            # about one frame: the kernel's own floor is 1000
MAX_QUANTUM = 200_000          # above this the kernel would warn (when it computes the quantum itself)
BURST_S = 0.001                # a class may send 1 ms of its rate (ceil) at once ...
MIN_BURST = 64 * 1024 + 1_600  # ... and at least one full GSO skb (veth passes 64 KiB skbs to the qdisc)
MIN_TBF_BURST = 1_600          # one full frame
MAX_RATE32 = (1 << 32) - 1     # bytes/s in tc_ratespec; pyroute2's tbf sends no TCA_TBF_RATE64
COUNTERS = ("bytes", "packets", "drops", "overlimits", "requeues", "backlog_bytes", "backlog_packets")
HTB_PARAMS = ("rate_mbit", "ceil_mbit", "prio", "quantum")
LEAF_KINDS = ("fq", "netem")
NETEM_LIMIT = 10_000           # packets a netem root may hold: the default (1000) overflows at 1 Gbit/s with ms delays
DEFAULT_TXQLEN = 1000          # a veth's txqueuelen, should a link report none
MAX_NETEM_DELAY_MS = 1000.0
TBF_CLASS = 1                  # TBF's one class 1:1, the parent of its inner qdisc
MAX_DSCP = 63
ETH_P_IP = 0x0800


@dataclass(frozen=True)
class HtbClass:
    """One leaf class 1:<minor> under the parent 1:1: guaranteed rate_mbit, may borrow up to ceil_mbit; among
    classes with spare rate to borrow a lower prio (0-7) is served first."""

    minor: int
    rate_mbit: float
    ceil_mbit: float
    prio: int


@dataclass(frozen=True)
class Leaf:
    """The queue under every leaf class (HTB) or under a TBF root, instead of the kernel's default pfifo:
    `fq` (per-flow fair queueing that enforces socket pacing rates) or `netem` with `loss_pct` random loss."""

    kind: str
    loss_pct: float = 0.0

    def check(self) -> None:
        if self.kind not in LEAF_KINDS:
            raise UserError(f"a leaf qdisc must be one of {', '.join(LEAF_KINDS)}, not {self.kind!r}")
        if self.kind == "netem":
            _loss(self.loss_pct)
        elif self.loss_pct:
            raise UserError(f"loss_pct is netem's: a {self.kind} leaf drops nothing at random")


def dscp_key(dscp: int) -> str:
    """The u32 key matching an IPv4 DSCP: the header's first word holds the TOS byte in bits 16-23, DSCP its upper
    six bits (tc's `match ip dsfield (dscp << 2) 0xfc`)."""
    return f"0x{(dscp << 2) << 16:08x}/0x{0xFC << 16:08x}+0"


def _check_dscp_filters(filters: Sequence[tuple[int, int]], minors: set[int]) -> list[tuple[int, int]]:
    out = []
    for f in filters:
        dscp, minor = f
        if isinstance(dscp, bool) or not isinstance(dscp, int) or not 0 <= dscp <= MAX_DSCP:
            raise UserError(f"a DSCP filter's dscp must be an integer 0-{MAX_DSCP}, not {dscp!r}")
        if minor not in minors:
            raise UserError(f"a DSCP filter's class 1:{minor} is none of the classes")
        out.append((dscp, minor))
    if len({d for d, _ in out}) != len(out):
        raise UserError("a DSCP is given twice in the filters")
    return out


def _loss(pct: Any) -> float:
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct < 100:
        raise UserError(f"loss_pct must be a number in [0, 100), not {pct!r}")
    return float(pct)


def _add_leaf(nsr: Any, idx: int, parent: int, handle: int, leaf: Leaf) -> None:
    """Leaf `leaf` at handle `handle` under class `parent` (in the caller's journaled step)."""
    if leaf.kind == "netem":
        # the limit of the pfifo it replaces (the link's txqueuelen, as HTB and TBF give their default leaves): the
        # leaf changes the loss only, not how deep the class's queue may grow
        txqlen = nsr.get_links(idx)[0].get_attr("IFLA_TXQLEN") or DEFAULT_TXQLEN
        nsr.tc("add", "netem", index=idx, handle=handle, parent=parent, loss=leaf.loss_pct, limit=txqlen)
    else:  # fq with the kernel's defaults (pyroute2 knows no fq options; none are needed)
        _register_bare_plugin(leaf.kind)
        nsr.tc("add", leaf.kind, index=idx, handle=handle, parent=parent)


def _register_bare_plugin(kind: str) -> None:
    """pyroute2 0.9 forces the parent of a qdisc kind it has no module for to the root (requests/tc.py): a leaf fq
    would replace the HTB root instead (seen in the guest lab). A bare module (every attribute falls back to its
    sched_template) keeps the parent given."""
    import types

    from pyroute2.netlink.rtnl.tcmsg import plugins

    plugins.setdefault(kind, types.SimpleNamespace(parent=TC_H_ROOT))


def class_id(handle: int) -> str:
    """tc's notation of a handle: 0x1000a -> "1:a", a qdisc's 0x10000 -> "1:"; the root parent -> "root"."""
    if handle == TC_H_ROOT:
        return "root"
    minor = handle & 0xFFFF
    return f"{handle >> 16:x}:{minor:x}" if minor else f"{handle >> 16:x}:"


def _minor(minor: Any, what: str) -> int:
    if isinstance(minor, bool) or not isinstance(minor, int) or not PARENT_MINOR < minor <= MAX_MINOR:
        raise UserError(f"{what} must be an integer {PARENT_MINOR + 1}-{MAX_MINOR} (1:{PARENT_MINOR} is the "
                        f"parent class), not {minor!r}")
    return minor


def htb_priority(minor: int) -> int:
    """The SO_PRIORITY that puts a socket's packets into HTB class 1:<minor> of kvds's root `1:` (the class id,
    major << 16 | minor, which sch_htb's htb_classify matches against skb->priority)."""
    return ROOT_HANDLE | _minor(minor, "htb_priority's minor")


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UserError(f"{what} must be a positive number, not {value!r}")
    return float(value)


def _bytes_s(mbit: float) -> int:
    return max(1, round(mbit * 1e6 / 8))


def _quantum(rate_bytes: int, r2q: int) -> int:
    return int(min(MAX_QUANTUM, max(MIN_QUANTUM, rate_bytes // r2q)))


def _burst(rate_bytes: int) -> int:
    return int(max(MIN_BURST, rate_bytes * BURST_S))


def _check_classes(rate_mbit: float, classes: list[HtbClass], default_minor: int) -> None:
    if not classes:
        raise UserError("install_htb needs at least one class")
    seen: set[int] = set()
    for c in classes:
        if not isinstance(c, HtbClass):
            raise UserError(f"install_htb's classes must be HtbClass, not {type(c).__name__}")
        _minor(c.minor, "HtbClass.minor")
        if c.minor in seen:
            raise UserError(f"HtbClass.minor {c.minor} is given twice")
        seen.add(c.minor)
        rate = _positive(c.rate_mbit, f"HtbClass(minor={c.minor}).rate_mbit")
        ceil = _positive(c.ceil_mbit, f"HtbClass(minor={c.minor}).ceil_mbit")
        if ceil < rate:
            raise UserError(f"HtbClass(minor={c.minor}).ceil_mbit {ceil:g} is below its rate_mbit {rate:g}")
        if ceil > rate_mbit * (1 + 1e-9):
            raise UserError(f"HtbClass(minor={c.minor}).ceil_mbit {ceil:g} is above the link's rate_mbit {rate_mbit:g}")
        if isinstance(c.prio, bool) or not isinstance(c.prio, int) or not 0 <= c.prio < HTB_PRIOS:
            raise UserError(f"HtbClass(minor={c.minor}).prio must be an integer 0-{HTB_PRIOS - 1}, not {c.prio!r}")
    total = sum(c.rate_mbit for c in classes)
    if total > rate_mbit * (1 + 1e-9):
        raise UserError(f"the classes' rate_mbit add up to {total:g}, above the link's rate_mbit {rate_mbit:g}")
    if default_minor not in seen:
        minors = ", ".join(map(str, sorted(seen)))
        raise UserError(f"default_minor {default_minor!r} is none of the classes' minors ({minors})")


def _root(nsr: Any, idx: int) -> Any:
    """The root qdisc message of link idx (None if the link has none)."""
    for m in nsr.tc("dump", index=idx):
        if m["index"] == idx and m["parent"] == TC_H_ROOT:
            return m
    return None


def _index(nsr: Any, ns: str, ifname: str) -> int:
    found = nsr.link_lookup(ifname=ifname)
    if not found:
        raise UserError(f"no interface {ifname} in network namespace {ns}")
    return found[0]


def _begin(nsr: Any, j: Journal, ns: str, ifname: str, kind: str, desc: str) -> tuple[int, int]:
    """Refuse a link whose root is not its default qdisc, then journal the new root; (link index, journal seq)."""
    idx = _index(nsr, ns, ifname)
    root = _root(nsr, idx)
    if root is not None and root["handle"] != 0:
        raise KnobRefused(f"refusing to replace root qdisc {root.get_attr('TCA_KIND')} {class_id(root['handle'])} "
                          f"of {ns}/{ifname}: kvds installs a root only over a link's default qdisc")
    seq = j.record("qdisc", {"ns": ns, "ifname": ifname, "handle": ROOT_HANDLE, "kind": kind}, desc)
    return idx, seq


def _add_root(nsr: Any, j: Journal, seq: int, ns: str, ifname: str, kind: str, **kw: Any) -> None:
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        nsr.tc("add", kind, index=kw.pop("index"), handle=ROOT_HANDLE, **kw)
    except NetlinkError as exc:
        if exc.code == errno.EEXIST:  # a root appeared between the check and the add: not kvds's, never undone
            j.done(seq, exists=True)
            raise KnobRefused(f"refusing to replace the root qdisc of {ns}/{ifname}: one was installed meanwhile") \
                from None
        raise


def install_htb(ns: str, ifname: str, rate_mbit: float, classes: list[HtbClass], default_minor: int,
                leaf: Leaf | None = None, dscp_filters: Sequence[tuple[int, int]] = ()) -> None:
    """An HTB root `1:` on ns/ifname: parent class 1:1 at rate_mbit (rate = ceil), each HtbClass a leaf 1:<minor>
    under it (queue: `leaf` at handle <minor>:, else pfifo); unclassified packets go to 1:<default_minor>.
    `dscp_filters` (dscp, minor): u32 filters on the root sending IPv4 packets with that DSCP to 1:<minor> (a
    packet whose skb->priority names a class goes there first: htb_classify). Journaled: restore deletes the root,
    its classes, leaves and filters with it."""
    from pyroute2 import NetNS

    safe_children()
    rate_mbit = _positive(rate_mbit, "rate_mbit")
    classes = list(classes)
    _check_classes(rate_mbit, classes, default_minor)
    if leaf is not None:
        leaf.check()
    filters = _check_dscp_filters(dscp_filters, {c.minor for c in classes})
    check_ifname(ifname)
    require_kvds_netns(ns)
    link = _bytes_s(rate_mbit)
    r2q = max(1, math.ceil(link / PARENT_QUANTUM))
    j = get_journal()
    with NetNS(ns, flags=0) as nsr:
        leaves = f", {leaf.kind} leaves" if leaf else ""
        idx, seq = _begin(nsr, j, ns, ifname, "htb", f"installed htb root 1: on {ns}/{ifname} at {rate_mbit:g} "
                                                     f"Mbit ({len(classes)} classes, default 1:{default_minor:x}"
                                                     f"{leaves})")
        _add_root(nsr, j, seq, ns, ifname, "htb", index=idx, default=default_minor, r2q=r2q)
        parent = ROOT_HANDLE | PARENT_MINOR
        nsr.tc("add-class", "htb", index=idx, handle=parent, parent=ROOT_HANDLE, rate=link, ceil=link,
               burst=_burst(link), cburst=_burst(link), quantum=_quantum(link, r2q), prio=0)
        for c in classes:
            rate, ceil = _bytes_s(c.rate_mbit), _bytes_s(c.ceil_mbit)
            nsr.tc("add-class", "htb", index=idx, handle=ROOT_HANDLE | c.minor, parent=parent, rate=rate, ceil=ceil,
                   burst=_burst(rate), cburst=_burst(ceil), quantum=_quantum(rate, r2q), prio=c.prio)
            if leaf is not None:
                _add_leaf(nsr, idx, ROOT_HANDLE | c.minor, c.minor << 16, leaf)
        for dscp, minor in filters:
            nsr.tc("add-filter", "u32", index=idx, parent=ROOT_HANDLE, prio=1, protocol=ETH_P_IP,
                   target=ROOT_HANDLE | minor, keys=[dscp_key(dscp)])
    j.done(seq)


def install_tbf(ns: str, ifname: str, rate_mbit: float, burst_bytes: int, latency_ms: float,
                leaf: Leaf | None = None) -> None:
    """A TBF root `1:` on ns/ifname: rate_mbit with a bucket of burst_bytes, packets waiting at most latency_ms
    (the queue limit follows from it; with `leaf`, its queue at handle 10: instead). Journaled: restore deletes the
    root."""
    from pyroute2 import NetNS

    safe_children()
    rate_mbit = _positive(rate_mbit, "rate_mbit")
    latency_ms = _positive(latency_ms, "latency_ms")
    if isinstance(burst_bytes, bool) or not isinstance(burst_bytes, int) or burst_bytes < MIN_TBF_BURST:
        raise UserError(f"burst_bytes must be an integer of at least {MIN_TBF_BURST} (one full frame), "
                        f"not {burst_bytes!r}")
    rate = _bytes_s(rate_mbit)
    if rate > MAX_RATE32:
        raise UserError(f"rate_mbit {rate_mbit:g} is above what a tbf root takes here ({MAX_RATE32 * 8 / 1e6:.0f} "
                        "Mbit: pyroute2 sends no TCA_TBF_RATE64)")
    if leaf is not None:
        leaf.check()
    check_ifname(ifname)
    require_kvds_netns(ns)
    j = get_journal()
    with NetNS(ns, flags=0) as nsr:
        leaves = f" ({leaf.kind} inner queue)" if leaf else ""
        idx, seq = _begin(nsr, j, ns, ifname, "tbf", f"installed tbf root 1: on {ns}/{ifname} at {rate_mbit:g} "
                                                     f"Mbit{leaves}")
        _add_root(nsr, j, seq, ns, ifname, "tbf", index=idx, rate=rate, burst=burst_bytes, latency=latency_ms * 1000)
        if leaf is not None:
            _add_leaf(nsr, idx, ROOT_HANDLE | TBF_CLASS, 0x10 << 16, leaf)
    j.done(seq)


def install_netem(ns: str, ifname: str, delay_ms: float, loss_pct: float = 0.0) -> None:
    """A netem root `1:` on ns/ifname: every packet held delay_ms (integer microseconds, as tc), loss_pct of
    them dropped at random. Journaled: restore deletes the root."""
    from pyroute2 import NetNS

    safe_children()
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, (int, float)) or not 0 <= delay_ms <= MAX_NETEM_DELAY_MS:
        raise UserError(f"delay_ms must be a number in [0, {MAX_NETEM_DELAY_MS:g}], not {delay_ms!r}")
    loss_pct = _loss(loss_pct)
    check_ifname(ifname)
    require_kvds_netns(ns)
    j = get_journal()
    with NetNS(ns, flags=0) as nsr:
        idx, seq = _begin(nsr, j, ns, ifname, "netem", f"installed netem root 1: on {ns}/{ifname}: delay "
                                                       f"{delay_ms:g} ms, loss {loss_pct:g} %")
        _add_root(nsr, j, seq, ns, ifname, "netem", index=idx, delay=round(delay_ms * 1000), loss=loss_pct,
                  limit=NETEM_LIMIT)
    j.done(seq)


@undo_handler("qdisc")
def _undo_qdisc(a: dict[str, Any]) -> None:
    from pyroute2 import NetNS
    from pyroute2.netlink.exceptions import NetlinkError

    safe_children()
    if a.get("exists") or a["ns"] not in namespaces():
        return  # never installed by kvds, or the namespace (and every qdisc in it) is gone already
    try:
        with NetNS(a["ns"], flags=0) as nsr:
            found = nsr.link_lookup(ifname=a["ifname"])
            if not found:
                return
            root = _root(nsr, found[0])
            if root is None or root["handle"] != a["handle"] or root.get_attr("TCA_KIND") != a["kind"]:
                return  # not installed yet (killed between journaling and installing), or not kvds's root
            nsr.tc("del", index=found[0], handle=a["handle"], root=True)
    except FileNotFoundError:
        return  # the namespace was removed meanwhile
    except NetlinkError as exc:
        if exc.code not in (errno.ENODEV, errno.ENOENT):  # the link or the root went away meanwhile
            raise


def _counters(msg: Any) -> dict[str, int]:
    """A qdisc's or class's counters from TCA_STATS2 (TCA_STATS_BASIC, TCA_STATS_QUEUE), else the old TCA_STATS."""
    s2 = msg.get_attr("TCA_STATS2")
    basic = s2.get_attr("TCA_STATS_BASIC") if s2 is not None else None
    queue = s2.get_attr("TCA_STATS_QUEUE") if s2 is not None else None
    if basic is not None and queue is not None:
        return {"bytes": basic["bytes"], "packets": basic["packets"], "drops": queue["drops"],
                "overlimits": queue["overlimits"], "requeues": queue["requeues"], "backlog_bytes": queue["backlog"],
                "backlog_packets": queue["qlen"]}
    old = msg.get_attr("TCA_STATS")
    if old is None:
        raise RuntimeError(f"tc message of {class_id(msg['handle'])} carries neither TCA_STATS2 nor TCA_STATS")
    return {"bytes": old["bytes"], "packets": old["packets"], "drops": old["drop"], "overlimits": old["overlimits"],
            "requeues": 0, "backlog_bytes": old["backlog"], "backlog_packets": old["qlen"]}


def _htb_params(msg: Any) -> dict[str, Any]:
    opts = msg.get_attr("TCA_OPTIONS")
    parms = opts.get_attr("TCA_HTB_PARMS") if opts is not None else None
    if parms is None:
        return dict.fromkeys(HTB_PARAMS)
    rate = opts.get_attr("TCA_HTB_RATE64") or parms["rate"]
    ceil = opts.get_attr("TCA_HTB_CEIL64") or parms["ceil"]
    return {"rate_mbit": rate * 8 / 1e6, "ceil_mbit": ceil * 8 / 1e6, "prio": parms["prio"],
            "quantum": parms["quantum"]}


def qdisc_stats(ns: str, ifname: str) -> dict[str, Any]:
    """The root qdisc's and its classes' counters, read through netlink:
    {"qdisc": {kind, handle, bytes, packets, drops, overlimits, requeues, backlog_bytes, backlog_packets},
     "classes": {"1:a": {same counters, minor, parent, rate_mbit, ceil_mbit, prio, quantum}},
     "leaves": {"a:": {kind, parent, same counters}}} -- class ids in tc's (hex) notation; rate/ceil/prio/quantum
    (bytes) are an HTB class's parameters (None for another kind's class); leaves are the qdiscs under the root's
    classes (a netem leaf's random losses count in its `drops`, not in its class's)."""
    from pyroute2 import NetNS

    safe_children()
    check_ifname(ifname)
    if ns not in namespaces():
        raise UserError(f"network namespace {ns} does not exist")
    with NetNS(ns, flags=0) as nsr:
        idx = _index(nsr, ns, ifname)
        root = _root(nsr, idx)
        if root is None:
            raise RuntimeError(f"{ns}/{ifname} reports no root qdisc")
        major = root["handle"] >> 16
        out: dict[str, Any] = {"qdisc": {"kind": root.get_attr("TCA_KIND"), "handle": class_id(root["handle"]),
                                         **_counters(root)}, "classes": {}, "leaves": {}}
        if major == 0:
            return out  # a default root has no classes
        for m in nsr.tc("dump", index=idx):
            if m["index"] == idx and m["parent"] != TC_H_ROOT and m["handle"] >> 16 != major:
                out["leaves"][class_id(m["handle"])] = {"kind": m.get_attr("TCA_KIND"),
                                                        "parent": class_id(m["parent"]), **_counters(m)}
        for m in nsr.get_classes(index=idx):
            if m["index"] != idx or m["handle"] >> 16 != major:
                continue
            row: dict[str, Any] = {**_counters(m), "minor": m["handle"] & 0xFFFF, "parent": class_id(m["parent"])}
            row.update(_htb_params(m) if m.get_attr("TCA_KIND") == "htb" else dict.fromkeys(HTB_PARAMS))
            out["classes"][class_id(m["handle"])] = row
    return out
