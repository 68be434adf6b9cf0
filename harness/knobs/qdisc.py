"""Journaled traffic control inside kvds's network namespaces (the delivery track's bottleneck, harness/net).

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

Class ids in `qdisc_stats` are written as tc writes them: hexadecimal minor, so minor 10 is "1:a".
"""

from __future__ import annotations

import errno
import math
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class HtbClass:
    """One leaf class 1:<minor> under the parent 1:1: guaranteed rate_mbit, may borrow up to ceil_mbit; among
    classes with spare rate to borrow a lower prio (0-7) is served first."""

    minor: int
    rate_mbit: float
    ceil_mbit: float
    prio: int


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


def install_htb(ns: str, ifname: str, rate_mbit: float, classes: list[HtbClass], default_minor: int) -> None:
    """An HTB root `1:` on ns/ifname: parent class 1:1 at rate_mbit (rate = ceil), each HtbClass a leaf 1:<minor>
    under it; unclassified packets go to 1:<default_minor>. Journaled: restore deletes the root."""
    from pyroute2 import NetNS

    safe_children()
    rate_mbit = _positive(rate_mbit, "rate_mbit")
    classes = list(classes)
    _check_classes(rate_mbit, classes, default_minor)
    check_ifname(ifname)
    require_kvds_netns(ns)
    link = _bytes_s(rate_mbit)
    r2q = max(1, math.ceil(link / PARENT_QUANTUM))
    j = get_journal()
    with NetNS(ns, flags=0) as nsr:
        idx, seq = _begin(nsr, j, ns, ifname, "htb", f"installed htb root 1: on {ns}/{ifname} at {rate_mbit:g} "
                                                     f"Mbit ({len(classes)} classes, default 1:{default_minor:x})")
        _add_root(nsr, j, seq, ns, ifname, "htb", index=idx, default=default_minor, r2q=r2q)
        parent = ROOT_HANDLE | PARENT_MINOR
        nsr.tc("add-class", "htb", index=idx, handle=parent, parent=ROOT_HANDLE, rate=link, ceil=link,
               burst=_burst(link), cburst=_burst(link), quantum=_quantum(link, r2q), prio=0)
        for c in classes:
            rate, ceil = _bytes_s(c.rate_mbit), _bytes_s(c.ceil_mbit)
            nsr.tc("add-class", "htb", index=idx, handle=ROOT_HANDLE | c.minor, parent=parent, rate=rate, ceil=ceil,
                   burst=_burst(rate), cburst=_burst(ceil), quantum=_quantum(rate, r2q), prio=c.prio)
    j.done(seq)


def install_tbf(ns: str, ifname: str, rate_mbit: float, burst_bytes: int, latency_ms: float) -> None:
    """A TBF root `1:` on ns/ifname: rate_mbit with a bucket of burst_bytes, packets waiting at most latency_ms
    (the queue limit follows from it). Journaled: restore deletes the root."""
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
    check_ifname(ifname)
    require_kvds_netns(ns)
    j = get_journal()
    with NetNS(ns, flags=0) as nsr:
        idx, seq = _begin(nsr, j, ns, ifname, "tbf", f"installed tbf root 1: on {ns}/{ifname} at {rate_mbit:g} Mbit")
        _add_root(nsr, j, seq, ns, ifname, "tbf", index=idx, rate=rate, burst=burst_bytes, latency=latency_ms * 1000)
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
     "classes": {"1:a": {same counters, minor, parent, rate_mbit, ceil_mbit, prio, quantum}}} -- class ids in tc's
    (hex) notation; rate/ceil/prio/quantum (bytes) are an HTB class's parameters (None for another kind's class)."""
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
                                         **_counters(root)}, "classes": {}}
        if major == 0:
            return out  # a default root has no classes
        for m in nsr.get_classes(index=idx):
            if m["index"] != idx or m["handle"] >> 16 != major:
                continue
            row: dict[str, Any] = {**_counters(m), "minor": m["handle"] & 0xFFFF, "parent": class_id(m["parent"])}
            row.update(_htb_params(m) if m.get_attr("TCA_KIND") == "htb" else dict.fromkeys(HTB_PARAMS))
            out["classes"][class_id(m["handle"])] = row
    return out
