"""`kvds net bench` for real: two namespaces, a veth, an HTB bottleneck, the endpoints; the classes land where the
mapping says, the anchor runs the standard tools, and everything is gone after a normal run, an error, SIGINT,
SIGTERM and SIGKILL + one `kvds restore`. Bad input exits 2 with one line before anything is created."""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness import doctor
from net_priority.classes import BASE_MINOR, htb_plan, roles_of
from harness.mapping import load_mapping
from tests.conftest import KVDS, REPO, foreground_signals, journals_of, needs_root

LAB = ("root", "net.netns", "net.veth", "net.qdisc.htb")


def _kvds_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("kvds-net-")]


def _links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
            if line.split(":")[1].strip().startswith(("kvp", "kvd"))]


def _endpoints() -> bytes:
    """kvds's own lab endpoints (their addresses are in 10.252/16: net_priority/veth_lab.py), not another test's."""
    return subprocess.run(["pgrep", "-f", r"harness\.net\.endpoint .*10\.252\."], capture_output=True).stdout


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*KVDS, "net", "bench", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["--rate-mbit", "0"], "--rate-mbit"),
    (["--rate-mbit", "fast"], "--rate-mbit"),
    (["--sizes", "10"], "--sizes"),
    (["--sizes", "16Q"], "not a size"),
    (["--step-ms", "-1"], "--step-ms"),
    (["--qdisc", "prio"], "--qdisc"),
    (["--variants", "nosuch"], "unknown mapping 'nosuch'"),
    (["--variants", "unloaded,intent"], "has no network fields"),
    (["--variants", "unloaded,unloaded"], "each variant once"),
    (["--qdisc", "tbf", "--variants", "baseline,net-htb"], "needs --qdisc htb"),
    (["--anchor-size", "1M"], "--anchor-size"),
    (["--rtt-ms", "2000"], "--rtt-ms must be in [0, 1000]"),
    (["--rtt-ms", "-1"], "--rtt-ms"),
    (["--loss-pct", "60"], "--loss-pct must be in [0, 50]"),
    (["--leaf", "sfq"], "--leaf"),
    (["--leaf", "fq", "--loss-pct", "1"], "cannot go with --leaf fq"),
    # two hosts (tests/net/test_net_two_hosts.py)
    (["--netns-hosts", "--classify", "priority"], "a socket priority never leaves its host"),
    (["--netns-hosts", "--ebpf"], "--ebpf runs on this host's own lab only"),
    (["--netns-hosts", "--rtt-ms", "5"], "--rtt-ms runs on this host's own lab only"),
    (["--prefill-host", "ssh://root@a.invalid"], "needs both --prefill-host and --decode-host"),
    (["--prefill-host", "ssh://root@h", "--decode-host", "ssh://root@h"], "name the same host"),
    (["--netns-hosts", "--prefill-host", "ssh://root@h"], "builds its own two hosts"),
    (["--prefill-host", "ssh://root@a", "--decode-host", "ssh://root@b", "--decode-ip", "nope"],
     "--decode-ip must be an IP address"),
    (["--prefill-host", "guest", "--decode-host", "ssh://root@b"], "must be an ssh://"),
    (["--decode-ip", "10.0.0.1"], "go with --prefill-host"),
    (["--prefill-host", "ssh://root@a", "--decode-host", "ssh://root@b", "--remote-netns", "wire"],
     "--remote-netns must name a kvds namespace"),
])
def test_bad_input_is_one_line_and_exit_2(kvds_env, args: list[str], says: str) -> None:
    before = _kvds_namespaces()
    res = _run(args, kvds_env, timeout=60)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert _kvds_namespaces() == before


def test_dry_run_shows_what_a_run_starts_and_creates_nothing(kvds_env) -> None:
    before = _kvds_namespaces()
    res = _run(["--dry-run", "--json", "--variants", "unloaded,baseline,net-htb", "--reps", "2"], kvds_env, timeout=60)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["summary"]
    assert plan["schema"] == "kvds.net-bench-plan/1" and [v for _, v in plan["order"][:3]] == [
        "unloaded", "baseline", "net-htb"]
    assert [c["minor"] for c in plan["htb_classes"]] == [10, 16]
    htb = plan["variants"]["net-htb"]
    assert htb["sockopt"]["fetch"]["priority"] == 0x10010
    assert len(plan["variants"]["unloaded"]["commands"]) == 2 and len(htb["commands"]) == 4
    assert any("chrt -f 10" in c and " fetcher " in c and "prio=65552" in c for c in htb["commands"])
    assert any(c.split()[4:6] == ["sockperf", "ping-pong"] for c in plan["anchor"])
    assert _kvds_namespaces() == before


def test_the_mapping_decides_each_roles_socket_options() -> None:
    htb, paced = roles_of(load_mapping("net-htb")), roles_of(load_mapping("net-paced"))
    assert htb["fetch"].sockopt("htb")["priority"] == (1 << 16) | (BASE_MINOR + 6)
    assert htb["fetch"].sockopt("htb")["tos"] == 46 << 2 and htb["bulk"].sockopt("htb")["priority"] == (1 << 16) | 10
    assert paced["bulk"].sockopt("htb", sockets=2) == {"pacing_bytes_s": int(850e6 / 8 / 2)}
    assert paced["fetch"].sockopt("tbf") == {}
    plan = htb_plan(1000.0, {0, 6})
    assert [(p.minor, p.prio) for p in plan] == [(10, 6), (16, 0)]
    assert sum(p.rate_mbit for p in plan) == pytest.approx(1000.0) and all(p.ceil_mbit == 1000.0 for p in plan)


@needs_root
@doctor.skip_unless(*LAB, "ebpf.libbpf")
def test_classes_land_where_the_mapping_says_and_the_lab_is_gone_after(kvds_env, tmp_path) -> None:
    res = _run(["--variants", "unloaded,baseline,net-htb", "--reps", "3", "--duration-s", "0.6", "--no-anchor",
                "--ebpf", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    s = doc["summary"]
    assert s["schema"] == "kvds.net-bench/1" and [v for _, v in s["rep_order"][:3]] == ["unloaded", "baseline",
                                                                                       "net-htb"]
    v = s["variants"]
    per_rep = int(0.6 / 0.010)
    assert all(x["fetches"] == 3 * per_rep for x in v.values()), {k: x["fetches"] for k, x in v.items()}
    # HTB counters: baseline puts everything in the default class 1:a; net-htb sends the fetch answers in 1:10
    # (0x10 = 10 + net_priority 6) and the bulk in 1:a
    assert v["baseline"]["qdisc"]["1:a"]["bytes"] > 0 and v["baseline"]["qdisc"].get("1:10", {}).get("bytes", 0) == 0
    assert v["net-htb"]["qdisc"]["1:10"]["bytes"] > 0 and v["net-htb"]["qdisc"]["1:a"]["bytes"] > 0
    assert v["unloaded"]["bulk_mbit"] is None and v["baseline"]["bulk_mbit"]["value"] > 0
    assert v["net-htb"]["interference_p99"] is None or "value" in v["net-htb"]["interference_p99"]
    assert v["net-htb"]["classes"]["fetch"]["sockopt"]["priority"] == 0x10010
    # eBPF: the fetch answers were queued at their socket priority, the bulk at the default class's
    prios = {p for rep in v["net-htb"]["ebpf"]["per_rep"] for p, q in rep["queue_delay_ns"].items() if q["count"]}
    assert {str(0x10010), str(0x1000a)} <= prios
    assert any("net_priority.endpoint fetcher" in c for c in s["commands"])
    assert _kvds_namespaces() == [] and _links() == []
    tag = s["config"]["lab"]["tag"]
    assert f"/kvds-net-{tag}/fetch-" in " ".join(s["commands"])  # the endpoints' files live in the lab's scratch dir
    assert not (Path(tempfile.gettempdir()) / f"kvds-net-{tag}").exists()  # ... which is gone after the run
    # the report's delivery section reads the run back through its typed summary, with the CDF figure
    rep = subprocess.run([*KVDS, "report", doc["run"], "--out", str(tmp_path / "report")], cwd=REPO, env=kvds_env,
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    assert "KV delivery" in md and "| net-htb |" in md and "net-latency-" in md


@needs_root
@doctor.skip_unless(*LAB, "ebpf.libbpf")
def test_ebpf_under_dscp_classification_sees_each_class_by_its_mark(kvds_env) -> None:
    """Under --classify dscp the sockets carry no priority (every skb->priority is 0): --ebpf keys the queue delay
    on the IPv4 DSCP the u32 filters classify by, so the fetch answers (dscp 46 -> 1:10) and the bulk (dscp 8 ->
    the default 1:a) show up as two classes."""
    res = _run(["--variants", "unloaded,net-htb", "--reps", "1", "--duration-s", "0.6", "--no-anchor", "--ebpf",
                "--classify", "dscp", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr[-3000:]
    v = json.loads(res.stdout)["summary"]["variants"]["net-htb"]
    assert "priority" not in v["classes"]["fetch"]["sockopt"] and v["classes"]["fetch"]["sockopt"]["tos"] == 46 << 2
    rep = v["ebpf"]["per_rep"][0]
    assert rep["key"] == "dscp"
    seen = {q["dscp"]: q["class"] for q in rep["queue_delay_ns"].values() if q["count"]}
    assert seen.get(46) == "1:10" and seen.get(8) == "1:a", seen
    assert v["qdisc"]["1:10"]["bytes"] > 0 and v["qdisc"]["1:a"]["bytes"] > 0


@needs_root
@doctor.skip_unless(*LAB, "net.tools.sockperf", "net.tools.iperf3")
def test_the_anchor_runs_sockperf_and_iperf3_beside_kvds(kvds_env) -> None:
    res = _run(["--variants", "unloaded", "--reps", "1", "--duration-s", "0.3", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr[-3000:]
    a = json.loads(res.stdout)["summary"]["anchor"]
    assert set(a["pingpong"]) == {"16384"}
    pp = a["pingpong"]["16384"]
    assert len(pp["kvds_mean_us"]) == len(pp["sockperf_avg_us"]) == 3 and all(x > 0 for x in pp["kvds_mean_us"])
    assert pp["verdict"]["status"] in ("met", "missed", "inconclusive") and "kvds / sockperf" in pp["text"]
    assert a["bulk"]["iperf3"]["received_mbit"] > 0 and a["bulk"]["kvds_mbit"] > 0
    assert a["loaded"]["sockperf"]["observations"] > 0
    assert _kvds_namespaces() == []


def _wait_for_lab(proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not _kvds_namespaces() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _kvds_namespaces(), "the bench never built its lab"
    time.sleep(2.0)  # into the repetitions: endpoints running


@needs_root
@doctor.skip_unless(*LAB)
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_run_removes_the_lab(kvds_env, signum: int, status: int) -> None:
    proc = subprocess.Popen([*KVDS, "net", "bench", "--variants", "unloaded,baseline", "--reps", "3",
                             "--duration-s", "5", "--no-anchor"], cwd=REPO, env=kvds_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=foreground_signals)
    _wait_for_lab(proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err[-2000:]
    assert _kvds_namespaces() == [] and _links() == []
    assert journals_of(proc.pid) == []
    assert not _endpoints()


@needs_root
@doctor.skip_unless(*LAB)
def test_sigkill_then_one_restore_removes_the_lab(kvds_env) -> None:
    proc = subprocess.Popen([*KVDS, "net", "bench", "--variants", "unloaded,baseline", "--reps", "3",
                             "--duration-s", "5", "--no-anchor"], cwd=REPO, env=kvds_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for_lab(proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert _kvds_namespaces(), "SIGKILL leaves the lab for restore"
    res = subprocess.run([*KVDS, "restore"], cwd=REPO, env=kvds_env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert _kvds_namespaces() == [] and _links() == []
    assert journals_of(proc.pid) == []
    time.sleep(0.5)
    assert not _endpoints()
