"""Journaled network namespaces and veth pairs (the remote-hosts lab's test hosts), removed on restore.

kvds only ever deletes what it created: creating a namespace or link whose name already exists is refused
before anything is journaled, so an undo can never remove somebody else's namespace or interface.
"""

from __future__ import annotations

import errno
import ipaddress
from typing import Any

from harness.errors import KnobRefused
from harness.journal import get_journal, undo_handler


def namespaces() -> list[str]:
    from pyroute2 import netns  # imported on use: pyroute2 takes ~0.7 s to import, every kvds command imports knobs

    return list(netns.listnetns())


def _link_exists(ifname: str, ns: str | None = None) -> bool:
    from pyroute2 import IPRoute, NetNS

    ipr = NetNS(ns) if ns else IPRoute()
    try:
        return bool(ipr.link_lookup(ifname=ifname))
    finally:
        ipr.close()


def create_netns(name: str) -> str:
    """A fresh named network namespace (/run/netns/<name>) with its loopback up; deleted on restore."""
    if name in namespaces():
        raise KnobRefused(f"refusing to create network namespace {name}: it already exists and is not kvds's")
    from pyroute2 import NetNS, netns

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

    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=a["ifname"])
        if found:
            ipr.link("del", index=found[0])
