"""`kvds net bench` across two hosts: the prefill endpoints on one netns sshd host, the decode endpoints on another
(harness/remote/netns_hosts.py), joined by one veth pair; the bottleneck on the sender's egress picks classes by
the DSCP mark alone (the sockets carry no priority), every endpoint starts over SSH and stops when its session
closes, and the hosts, the wire and the sender's qdisc are gone after the run. (Its bad input is tested with the
rest of the bench's, in tests/net/test_net_bench.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

from harness import doctor
from tests.conftest import KVDS, REPO, needs_root

LAB = ("root", "net.netns", "net.veth", "net.qdisc.htb")


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*KVDS, "net", "bench", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _lab_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("kvds-lab-")]


def test_an_endpoint_with_stop_on_eof_stops_when_its_stdin_closes() -> None:
    """What ends a remote endpoint with its SSH session: it prints its pid, serves, and exits 0 on stdin's end."""
    proc = subprocess.Popen([sys.executable, "-m", "net_priority.endpoint", "--stop-on-eof", "fetch-server",
                             "--bind", "127.0.0.1:0"], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().split() == ["pid", str(proc.pid)]
        assert proc.stdout.readline().startswith("ready 127.0.0.1:")
        assert proc.poll() is None  # serving while its session lasts
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


@needs_root
@doctor.skip_unless(*LAB)
def test_two_hosts_classify_by_dscp_on_the_sender_and_leave_nothing(kvds_env) -> None:
    res = _run(["--netns-hosts", "--variants", "unloaded,baseline,net-htb", "--reps", "1", "--duration-s", "1",
                "--json"], kvds_env)
    assert res.returncode == 0, res.stderr[-3000:]
    s = json.loads(res.stdout)["summary"]
    lab, cfg = s["config"]["lab"], s["config"]
    prefill, decode = lab["prefill_ns"], lab["decode_ns"]
    assert prefill.startswith("ssh://root@10.250.") and decode.startswith("ssh://root@10.250.") and prefill != decode
    # the agent found the sender's interface toward the decode host's data address: the wire, not its ssh link
    assert lab["prefill_if"].startswith("kvw") and lab["decode_addr"].startswith("10.253.")
    assert cfg["classify"] == "dscp" and {(f["dscp"], f["minor"]) for f in cfg["dscp_filters"]} == {(46, 16), (8, 10)}
    cmds = s["commands"]
    starts = {role: [c for c in cmds if f"net_priority.endpoint --stop-on-eof {role} " in c]
              for role in ("fetch-server", "fetcher", "bulk-sender", "bulk-receiver")}
    at = prefill.removeprefix("ssh://")
    assert all(c.startswith("ssh ") and f" {at} " in c for r in ("fetch-server", "bulk-sender") for c in starts[r])
    assert all(c.startswith("ssh ") and f" {at} " not in c for r in ("fetcher", "bulk-receiver") for c in starts[r])
    assert any("net_priority.link_agent" in c for c in cmds)
    v = s["variants"]
    assert all(x["fetches"] == 100 for x in v.values()), {k: x["fetches"] for k, x in v.items()}
    # the fetch answers carry only their DSCP mark (46 -> tos 184), no socket priority: the u32 filter on the
    # sender's egress put them in 1:10; the bulk (dscp 8) in the default class 1:a; the baseline all in 1:a
    fetch_opt = v["net-htb"]["classes"]["fetch"]["sockopt"]
    assert fetch_opt.get("tos") == 184 and "priority" not in fetch_opt
    assert v["net-htb"]["qdisc"]["1:10"]["bytes"] > 0 and v["net-htb"]["qdisc"]["1:a"]["bytes"] > 0
    assert v["baseline"]["qdisc"]["1:a"]["bytes"] > 0 and v["baseline"]["qdisc"].get("1:10", {}).get("bytes", 0) == 0
    assert v["baseline"]["bulk_mbit"]["value"] > 0 and v["unloaded"]["bulk_mbit"] is None
    # the fetch server's run-queue wait came from the sender (its agent read the remote pid's schedstat)
    ev = v["net-htb"]["stalls"][0]["runq_ms"]
    assert ev["fetch-server"] is not None and ev["fetcher"] is not None
    assert _lab_namespaces() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert " kvw" not in links and " kvl" not in links
    left = subprocess.run(["pgrep", "-f", "net_priority.(endpoint --stop-on-eof|link_agent)"], capture_output=True)
    assert left.stdout == b""
