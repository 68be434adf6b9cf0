"""`python -m net_priority.link_agent --peer IP --setup JSON`: the sender's side of a two-host bench
(net_priority/two_hosts.py starts it on the prefill host over SSH).

It finds this host's interface toward the decode host's data address (`ip route get`), installs the bottleneck on
that interface's egress (net_priority/veth_lab.shape_link: HTB with DSCP u32 filters, or TBF) through this host's
own knob journal, prints `ready {"netns", "ifname", "ip"}`, then answers one request a line on stdin:
`stats` (the bottleneck's counters, one JSON line) and `runq PID` (that process's run-queue wait in ns, or null).
When stdin closes (the bench is done, or its SSH session died) it restores the journal and exits; SIGTERM and
SIGHUP do the same, and `kvds restore` on the host undoes what a SIGKILLed agent left.

The knobs change only kvds's own network namespaces (`kvds-*`): the agent must run inside one (the netns SSH hosts
of harness/remote/netns_hosts.py are; on a real host, put the data NIC in a `kvds-` namespace: the README's
recipe). Bad input or a host without the mechanism: one line on stderr, exit 2 / 3."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from typing import Any

from harness import results
from harness.errors import UserError

PROG = "python -m net_priority.link_agent"


def own_netns() -> str:
    """The name of the kvds network namespace this process runs in (its nsfs inode is /run/netns/<name>'s)."""
    from harness.knobs.netns import KVDS_NETNS_PREFIX, namespaces

    mine = os.stat("/proc/self/ns/net").st_ino
    for name in namespaces():
        try:
            if name.startswith(KVDS_NETNS_PREFIX) and os.stat(f"/run/netns/{name}").st_ino == mine:
                return name
        except OSError:
            continue
    raise UserError("this host's data link is not in a kvds network namespace (kvds-*): kvds changes qdiscs only "
                    "there (move the NIC into one: see net_priority/README.md, two real hosts)")


def route_to(peer: str) -> tuple[str, str]:
    """(interface, source address) this host uses to reach `peer`."""
    out = subprocess.run(["ip", "-j", "route", "get", peer], capture_output=True, text=True)
    if out.returncode != 0:
        raise UserError(f"no route from this host to {peer}: {out.stderr.strip() or 'ip route get failed'}")
    route = json.loads(out.stdout)[0]
    if "dev" not in route or "prefsrc" not in route:
        raise UserError(f"the route to {peer} names no interface and source address: {route}")
    return route["dev"], route["prefsrc"]


def install(peer: str, setup: dict[str, Any]) -> dict[str, str]:
    """Shape this host's egress toward `peer` as `setup` says (NetSetup fields, the HTB plan, the DSCP filters)."""
    from net_priority.classes import DscpFilter, HtbPlan
    from net_priority.config import NetSetup
    from net_priority.veth_lab import shape_link

    ns = own_netns()
    ifname, ip = route_to(peer)
    cfg = NetSetup(**setup["link"])
    cfg.check()
    shape_link(ns, ifname, cfg, [HtbPlan(**p) for p in setup["plan"]], [DscpFilter(**f) for f in setup["filters"]])
    return {"netns": ns, "ifname": ifname, "ip": ip}


def serve(link: dict[str, str]) -> None:
    from harness.knobs.qdisc import qdisc_stats
    from net_priority.procs import runq_wait_pid

    for line in sys.stdin:
        words = line.split()
        if words == ["stats"]:
            answer: Any = qdisc_stats(link["netns"], link["ifname"])
        elif len(words) == 2 and words[0] == "runq" and words[1].isdigit():
            answer = runq_wait_pid(int(words[1]))
        else:
            answer = {"error": f"unknown request {line.strip()!r} (stats, runq PID)"}
        print(results.dumps(answer, indent=None), flush=True)


def _leave(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: the journal is restored at exit


def main(argv: list[str] | None = None) -> int:
    from harness import journal

    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--peer", required=True, help="the decode host's data address")
    p.add_argument("--setup", required=True, help="JSON: link (NetSetup fields), plan, filters")
    args = p.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _leave)
    try:
        try:
            setup = json.loads(args.setup)
        except ValueError as exc:
            raise UserError(f"--setup is not JSON: {exc}") from None
        link = install(args.peer, setup)
        print("ready " + results.dumps(link, indent=None), flush=True)
        serve(link)
    except UserError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:  # a host without the mechanism, a refused knob: one line, never a traceback
        from harness.errors import Unavailable

        print(f"{PROG}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 3 if isinstance(exc, Unavailable) else 1
    finally:
        journal.restore_current()
    return 0


if __name__ == "__main__":
    sys.exit(main())
