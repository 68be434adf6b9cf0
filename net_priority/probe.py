"""The delivery track's doctor probe (area "net", registered in pyproject.toml's `kvds.probes`): the lab's
mechanisms (network namespaces, veth, qdiscs), the per-socket ones (pacing, congestion controls) and the standard
tools kvds's figures are checked against.

- net.netns: CONFIG_NET_NS, pyroute2 and `ip` (the tools run under `ip netns exec`), and, as root, a scratch
  namespace really created and removed through the knob journal;
- net.veth: CONFIG_VETH, and, as root, a scratch pair really created between two scratch namespaces;
- net.qdisc.<kind>: the running kernel's config (=y, or =m with the module present), root needed to install one;
- net.pacing: TCP's internal pacing (Linux >= 4.13; SO_MAX_PACING_RATE set and read back on a scratch socket);
- net.cc.<name>: a row for every congestion control Linux ships (harness.mapping.TCP_CONGESTION) and every one
  this kernel registered, so that any name a mapping may use is known to `kvds doctor`;
- net.tools.<tool>: sockperf, iperf3, qperf on PATH.
An exception inside kvds while probing is status "error", never "unavailable".
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
from pathlib import Path
from typing import Callable

from harness.capability import Capability, available, kvds_error, unavailable
from harness.kconfig import config_state
from harness.mapping import TCP_AVAILABLE_CC, TCP_CONGESTION, registered_congestion

AREA = "net"
QDISCS = {"htb": "NET_SCH_HTB", "tbf": "NET_SCH_TBF", "netem": "NET_SCH_NETEM", "fq": "NET_SCH_FQ"}
TOOLS = ("sockperf", "iperf3", "qperf")
TCP_ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # asm-generic/socket.h
PACING_SINCE = (4, 13)  # TCP paces itself without the fq qdisc ("tcp: internal implementation for pacing")


def _root() -> bool:
    return os.geteuid() == 0


def needs_root(name: str, reason: str) -> Capability:
    return Capability(name, "needs-root", reason, AREA)


def _module(name: str, subdir: str) -> str | None:
    """Where kernel module `name` is: loaded (/sys/module) or a file under /lib/modules/<release>/kernel/<subdir>;
    None if absent."""
    if Path(f"/sys/module/{name}").is_dir():
        return f"/sys/module/{name}"
    for p in sorted(Path(f"/lib/modules/{os.uname().release}/kernel/{subdir}").glob(f"{name}.ko*")):
        return str(p)
    return None


def _kconfig(option: str, module: str, subdir: str) -> tuple[bool, str]:
    """Whether the running kernel has `option` built (=y) or as a present module (=m, in kernel/<subdir>), and
    why."""
    state = config_state(option)
    opt = option if option.startswith("CONFIG_") else f"CONFIG_{option}"
    if state == "y":
        return True, f"{opt}=y"
    if state == "m":
        where = _module(module, subdir)
        if where:
            return True, f"{opt}=m, module {module} at {where}"
        return False, f"{opt}=m but no module {module} under /lib/modules/{os.uname().release}/kernel/{subdir}"
    if state == "unknown":
        return False, f"the kernel publishes no config (/proc/config.gz, /boot/config-R): {opt} unknown"
    return False, f"{opt} is not set in the running kernel's config ({os.uname().release})"


def _guard(names: list[str], what: str, fn: Callable[[], list[Capability]]) -> list[Capability]:
    """fn's rows; if kvds's own code raises, an error row for each name fn reports (never "unavailable")."""
    try:
        return fn()
    except Exception as exc:  # kvds's own code failed: loudly an error, never a missing mechanism
        return [kvds_error(n, what, AREA, exc) for n in names]


def cc_names() -> list[str]:
    """Every congestion control the probe reports: Linux's (harness.mapping.TCP_CONGESTION), then the others this
    kernel registered."""
    return list(dict.fromkeys(sorted(TCP_CONGESTION) + registered_congestion()))


def _lab_try() -> tuple[str | None, str | None]:
    """As root: a scratch namespace pair joined by a veth pair, through the knob journal, removed again. Returns
    the kernel's refusal of (the namespaces, the veth pair), None where it worked."""
    from pyroute2.netlink.exceptions import NetlinkError

    from harness import journal
    from harness.knobs.netns import create_netns, create_veth_between

    tag = f"{os.getpid()}-{secrets.token_hex(2)}"
    a, b = f"kvds-probe-{tag}-a", f"kvds-probe-{tag}-b"
    with journal.scoped():
        try:
            create_netns(a)
            create_netns(b)
        except OSError as exc:
            return f"creating a network namespace: {exc.strerror or exc}", "needs net.netns"
        try:
            create_veth_between(a, "kvprobe0", "10.252.255.1/30", b, "kvprobe1", "10.252.255.2/30")
        except (NetlinkError, OSError) as exc:
            return None, f"creating a veth pair: {exc}"
    return None, None


def _lab() -> list[Capability]:
    ns_ok, ns_why = _kconfig("NET_NS", "", "")  # a bool option: never a module
    if config_state("NET_NS") == "unknown" and Path("/proc/self/ns/net").exists():
        ns_ok, ns_why = True, "/proc/self/ns/net exists (no kernel config published)"
    veth_ok, veth_why = _kconfig("VETH", "veth", "drivers/net")
    ip = shutil.which("ip")
    if not ns_ok:
        return [unavailable("net.netns", ns_why, AREA),
                unavailable("net.veth", f"{veth_why}; and no network namespaces ({ns_why})", AREA)]
    import pyroute2  # noqa: F401  a kvds dependency: failing to import it is kvds's error

    if ip is None:
        ns_cap = unavailable("net.netns", f"{ns_why}, but no `ip` (Debian iproute2): the tools run under "
                                          "`ip netns exec`", AREA)
    elif not _root():
        ns_cap = needs_root("net.netns", f"{ns_why}; creating network namespaces needs root")
    else:
        ns_cap = None
    if not veth_ok:
        veth_cap = unavailable("net.veth", veth_why, AREA)
    elif not _root():
        veth_cap = needs_root("net.veth", f"{veth_why}; creating veth pairs needs root")
    else:
        veth_cap = None
    if _root():
        ns_err, veth_err = _lab_try()
        if ns_err:
            return [unavailable("net.netns", f"{ns_why}, but {ns_err}", AREA),
                    veth_cap or unavailable("net.veth", f"{veth_why}, but {veth_err}", AREA)]
        if veth_cap is None and veth_err:
            veth_cap = unavailable("net.veth", f"{veth_why}, but {veth_err}", AREA)
    ns_cap = ns_cap or available("net.netns", f"{ns_why}; pyroute2 and {ip}; a scratch namespace created and "
                                              "removed", AREA)
    veth_cap = veth_cap or available("net.veth", f"{veth_why}; a scratch pair created between two namespaces", AREA)
    return [ns_cap, veth_cap]


def _qdiscs() -> list[Capability]:
    out = []
    sched = config_state("NET_SCHED")
    for kind, option in QDISCS.items():
        name = f"net.qdisc.{kind}"
        ok, why = _kconfig(option, f"sch_{kind}", "net/sched")
        if ok and sched == "n":
            ok, why = False, f"{why}, but CONFIG_NET_SCHED is off: no qdisc can be configured"
        if not ok:
            out.append(unavailable(name, why, AREA))
        elif not _root():
            out.append(needs_root(name, f"{why}; installing a qdisc needs CAP_NET_ADMIN"))
        else:
            out.append(available(name, why, AREA))
    name = "net.qdisc.pfifo_fast"
    why = "built into every kernel (net/sched/sch_generic.c, no config option)"
    if sched == "n":
        out.append(unavailable(name, f"{why}, but CONFIG_NET_SCHED is off: only as a link's default, not installable",
                               AREA))
    elif not _root():
        out.append(needs_root(name, f"{why}; installing a qdisc needs CAP_NET_ADMIN"))
    else:
        out.append(available(name, why, AREA))
    return out


def _release() -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if m is None:
        raise ValueError(f"kernel release {os.uname().release!r} has no major.minor")
    return int(m.group(1)), int(m.group(2))


def _pacing() -> list[Capability]:
    rel = _release()
    if rel < PACING_SINCE:
        return [unavailable("net.pacing", f"kernel {os.uname().release} is older than 4.13: TCP paces only under "
                                          "the fq qdisc", AREA)]
    want = 87_500_000  # 700 Mbit/s
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, want)
            got = s.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE)
        except OSError as exc:
            return [unavailable("net.pacing", f"SO_MAX_PACING_RATE refused: {exc.strerror or exc}", AREA)]
    if got != want:
        return [unavailable("net.pacing", f"SO_MAX_PACING_RATE read back {got} after setting {want}", AREA)]
    return [available("net.pacing", f"kernel {rel[0]}.{rel[1]} >= 4.13: TCP paces internally; SO_MAX_PACING_RATE "
                                    "set and read back", AREA)]


def _congestion() -> list[Capability]:
    registered = registered_congestion()
    try:
        allowed = set(TCP_ALLOWED_CC.read_text().split())
    except OSError:
        allowed = set()
    out = []
    for cc in cc_names():
        name = f"net.cc.{cc}"
        if cc in registered:
            if cc in allowed:
                out.append(available(name, f"registered ({TCP_AVAILABLE_CC.name}); allowed for every socket", AREA))
            elif _root():
                out.append(available(name, f"registered ({TCP_AVAILABLE_CC.name}); root only: not in "
                                           f"{TCP_ALLOWED_CC.name}", AREA))
            else:
                out.append(needs_root(name, f"registered, but not in {TCP_ALLOWED_CC.name}: TCP_CONGESTION needs "
                                            "CAP_NET_ADMIN"))
            continue
        option = TCP_CONGESTION.get(cc)
        if option is None:
            out.append(unavailable(name, f"not registered ({TCP_AVAILABLE_CC} does not list it)", AREA))
            continue
        ok, why = _kconfig(option, f"tcp_{cc}", "net/ipv4")
        if ok and config_state(option) == "m":
            reason = f"loadable: {why}; loaded by the first TCP_CONGESTION of a CAP_NET_ADMIN process"
            out.append(available(name, reason, AREA) if _root() else needs_root(name, reason))
        elif ok:
            out.append(unavailable(name, f"{why}, but not registered ({TCP_AVAILABLE_CC} does not list it)", AREA))
        else:
            out.append(unavailable(name, why, AREA))
    return out


def _tools() -> list[Capability]:
    out = []
    for tool in TOOLS:
        exe = shutil.which(tool)
        out.append(available(f"net.tools.{tool}", f"at {exe}", AREA) if exe else
                   unavailable(f"net.tools.{tool}", f"{tool} is not on PATH (Debian package {tool}, "
                                                    "harness/setup/debian-packages.txt)", AREA))
    return out


def probes() -> list[Capability]:
    out = _guard(["net.netns", "net.veth"], "probing network namespaces and veth pairs", _lab)
    out += _guard([f"net.qdisc.{k}" for k in (*QDISCS, "pfifo_fast")], "probing qdiscs", _qdiscs)
    out += _guard(["net.pacing"], "probing TCP pacing", _pacing)
    out += _guard([f"net.cc.{cc}" for cc in cc_names()], "probing TCP congestion controls", _congestion)
    out += _guard([f"net.tools.{t}" for t in TOOLS], "probing the standard tools", _tools)
    return out
