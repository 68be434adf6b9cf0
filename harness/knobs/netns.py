"""Journaled network namespaces and veth pairs (the remote-hosts lab's test hosts, the delivery track's two
hosts), removed on restore.

kvds only ever deletes what it created: creating a namespace or link whose name already exists is refused
before anything is journaled, so an undo can never remove somebody else's namespace or interface. Links between
two namespaces (and the qdiscs of harness/knobs/qdisc.py) are made only inside kvds's own namespaces, named
`kvds-*` (KVDS_NETNS_PREFIX).
"""

from __future__ import annotations

import errno
import ipaddress
from typing import Any

from harness.errors import KnobRefused, UserError
from harness.journal import get_journal, undo_handler

KVDS_NETNS_PREFIX = "kvds-"
IFNAMSIZ = 16  # include/uapi/linux/if.h: an interface name is at most 15 bytes


def safe_children() -> None:
    """Make pyroute2's helper processes safe for kvds. To open a socket inside a namespace pyroute2 forks a child
    and ends it with SIGTERM; that child would run kvds's SIGTERM handler (harness/cli.py) and unwind its copy of
    kvds's stack (scoped journals restored, workers stopped, "kvds: terminated" printed). With disable_mp_signal
    the child resets SIGTERM to its default before anything else. Called wherever kvds imports pyroute2."""
    import pyroute2.config

    pyroute2.config.disable_mp_signal = True


def namespaces() -> list[str]:
    from pyroute2 import netns  # imported on use: pyroute2 takes ~0.7 s to import, every kvds command imports knobs

    safe_children()
    return list(netns.listnetns())


def _link_exists(ifname: str, ns: str | None = None) -> bool:
    from pyroute2 import IPRoute, NetNS

    safe_children()
    ipr = NetNS(ns, flags=0) if ns else IPRoute()  # flags=0: never creates the namespace
    try:
        return bool(ipr.link_lookup(ifname=ifname))
    finally:
        ipr.close()


def create_netns(name: str) -> str:
    """A fresh named network namespace (/run/netns/<name>) with its loopback up; deleted on restore."""
    if name in namespaces():
        raise KnobRefused(f"refusing to create network namespace {name}: it already exists and is not kvds's")
    from pyroute2 import NetNS, netns

    safe_children()
    j = get_journal()
    seq = j.record("netns", {"name": name}, f"created network namespace {name}")
    netns.create(name)
    with NetNS(name) as ns:
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
    j.done(seq)
    return name


@undo_handler("netns")
def _undo_netns(a: dict[str, Any]) -> None:
    from pyroute2 import netns

    safe_children()
    if a["name"] in namespaces():
        netns.remove(a["name"])  # its interfaces (the veth ends inside) go with it


def create_veth(host_if: str, ns: str, ns_if: str, host_addr: str, ns_addr: str) -> tuple[str, str]:
    """A veth pair: host_if in the root namespace with host_addr ("10.250.0.1/30"), ns_if inside namespace
    ns with ns_addr, both up. Deleting one end deletes the pair, so restore removes host_if."""
    for text in (host_addr, ns_addr):
        try:
            ipaddress.ip_interface(text)
        except ValueError:
            raise KnobRefused(f"{text!r} is not an address/prefix") from None
    if _link_exists(host_if):
        raise KnobRefused(f"refusing to create interface {host_if}: it already exists and is not kvds's")
    if ns not in namespaces():
        raise FileNotFoundError(errno.ENOENT, f"network namespace {ns} does not exist")
    from pyroute2 import IPRoute, NetNS

    safe_children()
    j = get_journal()
    seq = j.record("veth", {"ifname": host_if}, f"created veth {host_if} <-> {ns}/{ns_if}")
    h = ipaddress.ip_interface(host_addr)
    n = ipaddress.ip_interface(ns_addr)
    with IPRoute() as ipr:
        ipr.link("add", ifname=host_if, kind="veth", peer={"ifname": ns_if, "net_ns_fd": ns})
        idx = ipr.link_lookup(ifname=host_if)[0]
        ipr.addr("add", index=idx, address=str(h.ip), prefixlen=h.network.prefixlen)
        ipr.link("set", index=idx, state="up")
    with NetNS(ns) as nsr:
        idx = nsr.link_lookup(ifname=ns_if)[0]
        nsr.addr("add", index=idx, address=str(n.ip), prefixlen=n.network.prefixlen)
        nsr.link("set", index=idx, state="up")
    j.done(seq)
    return host_if, ns_if


@undo_handler("veth")
def _undo_veth(a: dict[str, Any]) -> None:
    from pyroute2 import IPRoute

    safe_children()
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=a["ifname"])
        if found:
            ipr.link("del", index=found[0])


def check_ifname(name: str) -> str:
    """An interface name the kernel accepts (dev_valid_name): 1-15 bytes, no '/', ':' or whitespace."""
    if (not isinstance(name, str) or not 0 < len(name.encode()) < IFNAMSIZ or name in (".", "..")
            or any(c in name for c in "/:") or any(c.isspace() for c in name)):
        raise UserError(f"{name!r} is not an interface name (1-{IFNAMSIZ - 1} bytes, no '/', ':' or whitespace)")
    return name


def require_kvds_netns(ns: str) -> str:
    """A namespace kvds may change: one of its own (`kvds-*`), existing. Anything else is refused."""
    if not isinstance(ns, str) or not ns.startswith(KVDS_NETNS_PREFIX):
        raise KnobRefused(f"refusing to change network namespace {ns!r}: not a kvds namespace ({KVDS_NETNS_PREFIX}*)")
    if ns not in namespaces():
        raise UserError(f"network namespace {ns} does not exist")
    return ns


def _prefixed(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    try:
        if "/" not in text:
            raise ValueError
        return ipaddress.ip_interface(text)
    except (TypeError, ValueError):
        raise UserError(f"{text!r} is not an address/prefix like 10.252.0.1/30") from None


def _up(ns: str, ifname: str, addr: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
    from pyroute2 import NetNS

    safe_children()
    with NetNS(ns, flags=0) as nsr:
        idx = nsr.link_lookup(ifname=ifname)[0]
        nsr.addr("add", index=idx, address=str(addr.ip), prefixlen=addr.network.prefixlen)
        nsr.link("set", index=idx, state="up")


def create_veth_between(ns_a: str, if_a: str, addr_a: str, ns_b: str, if_b: str, addr_b: str) -> tuple[str, str]:
    """A veth pair joining two existing kvds namespaces: if_a inside ns_a with addr_a ("10.252.0.1/30"), if_b
    inside ns_b with addr_b, both up. Restore deletes if_a (which deletes the pair) if ns_a and if_a still exist;
    removing either namespace removes the pair too."""
    a, b = _prefixed(addr_a), _prefixed(addr_b)
    check_ifname(if_a)
    check_ifname(if_b)
    require_kvds_netns(ns_a)
    require_kvds_netns(ns_b)
    if ns_a == ns_b:
        raise UserError(f"create_veth_between joins two namespaces; both ends were asked in {ns_a}")
    for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
        if _link_exists(ifname, ns):
            raise KnobRefused(f"refusing to create interface {ns}/{ifname}: it already exists and is not kvds's")
    from pyroute2 import NetNS
    from pyroute2.netlink.exceptions import NetlinkError

    safe_children()
    j = get_journal()
    seq = j.record("netns_veth", {"ns": ns_a, "ifname": if_a}, f"created veth {ns_a}/{if_a} <-> {ns_b}/{if_b}")
    try:
        with NetNS(ns_a, flags=0) as nsr:
            nsr.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": ns_b})
    except NetlinkError as exc:
        if exc.code == errno.EEXIST:  # taken between the check and the add: somebody else's, never undone
            j.done(seq, exists=True)
            raise KnobRefused(f"refusing to create veth {ns_a}/{if_a} <-> {ns_b}/{if_b}: a name already exists "
                              "and is not kvds's") from None
        raise
    _up(ns_a, if_a, a)
    _up(ns_b, if_b, b)
    j.done(seq)
    return if_a, if_b


@undo_handler("netns_veth")
def _undo_netns_veth(a: dict[str, Any]) -> None:
    from pyroute2 import NetNS
    from pyroute2.netlink.exceptions import NetlinkError

    safe_children()
    if a.get("exists") or a["ns"] not in namespaces():
        return  # never created by kvds, or its namespace (and so the pair) is gone already
    try:
        with NetNS(a["ns"], flags=0) as nsr:
            found = nsr.link_lookup(ifname=a["ifname"])
            if found:
                nsr.link("del", index=found[0])
    except FileNotFoundError:
        return  # the namespace was removed meanwhile
    except NetlinkError as exc:
        if exc.code != errno.ENODEV:  # deleted meanwhile (its peer's namespace went away)
            raise
