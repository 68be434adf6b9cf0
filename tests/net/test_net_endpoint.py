"""The delivery track's traffic endpoints (net_priority/endpoint/, net_priority/sockopts.py) as real processes
over a real veth: a namespace (the prefill side: servers, bulk sender) joined to the root namespace (the decode
side: fetcher, ping-pong client, bulk receiver) through the journaled netns knobs, removed at the end.

No timing thresholds: what is checked is that every fetch is answered with its size, the clocks are ordered,
the socket options are in effect (read back by the endpoint and seen by `ss` from outside), bad arguments end in
exit 2 with one line, and a signal still leaves a result file."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from harness import doctor, journal
from harness.errors import UserError
from harness.knobs import create_netns, create_veth
from net_priority import sockopts
from net_priority.sockopts import SocketClass, SockoptError
from harness.paths import repo_root

ENDPOINT = [sys.executable, "-m", "net_priority.endpoint"]
ROOT = repo_root()
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()


class Lab:
    def __init__(self, ns: str, root_ip: str, ns_ip: str) -> None:
        self.ns, self.root_ip, self.ns_ip = ns, root_ip, ns_ip

    def argv(self, *args: str, inside: bool) -> list[str]:
        return (["ip", "netns", "exec", self.ns] if inside else []) + ENDPOINT + list(args)

    def start_server(self, *args: str, inside: bool = True) -> tuple[subprocess.Popen, str]:
        """A server process; returns it and the ADDR:PORT of its `ready` line."""
        p = subprocess.Popen(self.argv(*args, inside=inside), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([p.stdout], [], [], 30)
        line = p.stdout.readline() if ready else ""
        if not line.startswith("ready "):
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"{args[0]} did not say ready: {line!r} {out!r} {err!r}")
        return p, line.split()[1]

    def run(self, *args: str, inside: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args, inside=inside), cwd=ROOT, env=ENV, capture_output=True, text=True,
                              timeout=timeout)


def _stop(p: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    return p.returncode, out, err


def _summary(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


pytestmark = doctor.skip_unless("root")


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    pid = os.getpid()
    ns, hif = f"kvds-ne{pid}", f"kvne{pid % 100000}"
    net = f"10.248.{pid % 250}"
    with journal.scoped():
        create_netns(ns)
        create_veth(hif, ns, "ne0", f"{net}.1/30", f"{net}.2/30")
        yield Lab(ns, f"{net}.1", f"{net}.2")
    from harness.knobs.netns import _link_exists, namespaces

    assert ns not in namespaces() and not _link_exists(hif)


# --- sockopts ----------------------------------------------------------------------------------------------
def test_socket_class_text_form_round_trips_and_refuses_bad_input() -> None:
    c = sockopts.parse("prio=65546,tos=184,pace=87500000,cc=bbr")
    assert c == SocketClass(priority=65546, tos=184, pacing_bytes_s=87500000, congestion="bbr")
    assert sockopts.parse(str(c)) == c and SocketClass.from_dict(c.as_dict()) == c
    assert sockopts.parse("prio=0x1000a") == SocketClass(priority=65546)
    assert sockopts.parse("") == sockopts.parse("none") == SocketClass() and str(SocketClass()) == "none"
    for bad in ("prio=x", "prio=-1", f"prio={2**32}", "tos=256", "tos=185", "pace=0", "cc=a-b", "cc=", "foo=1",
                "prio=1,prio=2", "prio", "tos=1.5"):
        with pytest.raises(UserError) as e:
            sockopts.parse(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError):
        SocketClass.from_dict({"priority": 1, "dscp": 2})


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_socket_class_is_read_back(cc: str) -> None:
    if cc not in AVAILABLE_CC:
        pytest.skip(f"{cc} not in tcp_available_congestion_control ({' '.join(AVAILABLE_CC)})")
    c = SocketClass(priority=65546, tos=184, pacing_bytes_s=87_500_000, congestion=cc)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        assert c.apply(s) == c
        assert sockopts.read(s) == c
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # TOS last would reset the priority: not here
        assert SocketClass(tos=184, priority=3).apply(s) == SocketClass(tos=184, priority=3)


def test_socket_class_says_when_the_kernel_did_not_take_an_option() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        with pytest.raises(SockoptError, match="IP_TOS: set 185, but the kernel holds 184"):
            SocketClass(tos=185).apply(s)  # TCP keeps its own ECN bits: set, but not as asked
        with pytest.raises(SockoptError, match="TCP_CONGESTION='nosuchcc': the kernel refused it"):
            SocketClass(congestion="nosuchcc").apply(s)


# --- arguments ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["nosuchrole"],
    [],
    ["fetcher", "--connect", "10.0.0.1:80", "--sizes", "0,16384", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--sizes", "16384,abc", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--sizes", "16384,,4", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--step-ms", "0", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--step-ms", "-5", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--step-ms", "nan", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--count", "3", "--duration", "1", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:0", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "300.1.2.3:80", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "localhost:80", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1", "--count", "3", "--out", "x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--count", "3", "--out", "/proc/nonexistent/x.npz"],
    ["fetcher", "--connect", "10.0.0.1:80", "--count", "3", "--out", "x.npz", "--sockopt", "prio=x"],
    ["fetch-server", "--bind", "10.0.0.1:70000"],
    ["fetch-server", "--bind", "10.0.0.1:80", "--sockopt", "tos=3"],
    ["pingpong", "--connect", "10.0.0.1:80", "--size", "0", "--count", "3", "--out", "x.npz"],
    ["bulk-receiver", "--bind", "10.0.0.1:80", "--out", "x.npz", "--interval-ms", "0"],
    ["bulk-sender", "--connect", "10.0.0.1:80", "--streams", "0", "--duration", "1"],
    ["bulk-sender", "--connect", "10.0.0.1:80", "--streams", "2", "--duration", "1", "--chunk", "1x"],
], ids=lambda a: " ".join(a)[:60] or "no-role")
def test_bad_arguments_exit_2_with_one_line(args: list[str], tmp_path: Path) -> None:
    p = subprocess.run(ENDPOINT + args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "error" in _one_line(p.stderr) and p.stdout == ""


def test_cannot_connect_or_bind_exit_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run(ENDPOINT + ["fetcher", "--connect", f"127.0.0.1:{port}", "--count", "3", "--connect-timeout",
                                   "0.3", "--out", str(tmp_path / "f.npz")], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1 and "cannot connect" in _one_line(p.stderr), p.stderr
    assert np.load(tmp_path / "f.npz")["done_ns"].size == 0  # the file says nothing was fetched
    p = subprocess.run(ENDPOINT + ["fetch-server", "--bind", "192.0.2.1:5000"], cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "cannot bind" in _one_line(p.stderr) and p.stdout == "", p.stderr


# --- fetches -----------------------------------------------------------------------------------------------
def test_fetcher_gets_every_fetch_answered_with_its_size(lab: Lab, tmp_path: Path) -> None:
    srv, addr = lab.start_server("fetch-server", "--bind", f"{lab.ns_ip}:0", "--sockopt", "prio=65546,tos=184",
                                 "--out", str(tmp_path / "server.json"))
    out = tmp_path / "fetch.npz"
    sizes = [16384, 65536, 262144]
    try:
        p = lab.run("fetcher", "--connect", addr, "--sizes", ",".join(map(str, sizes)), "--step-ms", "2",
                    "--count", "60", "--warmup", "5", "--seed", "7", "--out", str(out), "--sockopt", "prio=5,tos=32")
    finally:
        rc, _, err = _stop(srv)
    assert p.returncode == 0, p.stderr
    assert rc == 0 and "Traceback" not in err, err
    s = _summary(p.stdout)
    assert (s["fetches"], s["planned"], s["warmup"], s["measured"], s["stopped"]) == (65, 65, 5, 60, "done")
    assert s["sockopt"]["priority"] == 5 and s["sockopt"]["tos"] == 32
    d = np.load(out)
    intended, issue, done, size = d["intended_ns"], d["issue_ns"], d["done_ns"], d["size"]
    assert intended.size == issue.size == done.size == size.size == 65 and int(d["warmup"]) == 5
    assert size.tolist() == random.Random(7).choices(sizes, k=65)  # the seed's draw
    assert np.all(np.diff(intended) == int(d["step_ns"])) and int(d["step_ns"]) == 2_000_000
    assert np.all(intended <= issue) and np.all(issue <= done)
    sent, first = d["sent_ns"], d["first_ns"]  # the per-fetch clocks: due <= issued <= sent <= first byte <= done
    assert sent.size == first.size == 65 and np.all(issue <= sent) and np.all(sent < first) and np.all(first <= done)
    assert int(d["runq_wait_ns"]) >= 0  # the fetcher's own run-queue wait over its schedule (schedstat)
    assert np.all(done[:-1] <= issue[1:])  # one connection, one fetch at a time
    meta = json.loads(str(d["meta"]))
    assert meta["stopped"] == "done" and meta["sockopt_held"]["priority"] == 5
    rec = json.loads((tmp_path / "server.json").read_text())
    assert rec["stopped"] == "SIGTERM" and len(rec["connections"]) == 1
    conn = rec["connections"][0]
    assert conn["requests"] == 65 and conn["bytes"] == int(size.sum()) and conn["end"] == "closed"
    assert conn["sockopt"]["priority"] == 65546 and conn["sockopt"]["tos"] == 184


def _ss_socket(ns: str, port: int) -> str:
    """`ss -tnie --tos` (inside ns) for the established socket with local port `port`: its two lines."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tnie", "--tos", "state", "established",
                          f"( sport = :{port} )"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()[1:]  # header
    return " ".join(lines)


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_socket_options_are_in_effect_and_sigterm_keeps_the_fetches(lab: Lab, tmp_path: Path, cc: str) -> None:
    if cc not in AVAILABLE_CC:
        pytest.skip(f"{cc} not in tcp_available_congestion_control ({' '.join(AVAILABLE_CC)})")
    opts = f"prio=65546,tos=184,pace=12500000,cc={cc}"
    srv, addr = lab.start_server("fetch-server", "--bind", f"{lab.ns_ip}:0", "--sockopt", opts,
                                 "--out", str(tmp_path / "server.json"))
    port = int(addr.rsplit(":", 1)[1])
    out = tmp_path / "fetch.npz"
    fetcher = subprocess.Popen(lab.argv("fetcher", "--connect", addr, "--duration", "600", "--step-ms", "5",
                                        "--sockopt", f"prio=6,tos=32,cc={cc}", "--out", str(out), inside=False),
                               cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        for _ in range(200):  # until the server's side of the connection is there with its options set
            seen = _ss_socket(lab.ns, port)
            if "class_id:0x1000a" in seen:
                break
            time.sleep(0.05)
        # seen from outside the endpoint: the prefill side's accepted socket carries the class
        assert "tos:0xb8" in seen and "class_id:0x1000a" in seen, seen
        assert f" {cc} " in f" {seen} " and "/100000000bps" in seen, seen  # max pacing 12.5 MB/s = 100 Mbit/s
        time.sleep(0.5)
        rc, fout, ferr = _stop(fetcher)
    finally:
        if fetcher.poll() is None:
            fetcher.kill()
        src, _, serr = _stop(srv)
    assert rc == 0 and "Traceback" not in ferr, ferr
    s = _summary(fout)
    assert s["stopped"] == "SIGTERM" and 0 < s["fetches"] < s["planned"]
    assert s["sockopt"] == {"priority": 6, "tos": 32, "pacing_bytes_s": None, "congestion": cc}
    d = np.load(out)
    assert d["done_ns"].size == s["fetches"] and np.all(d["issue_ns"] <= d["done_ns"])
    assert src == 0, serr
    conn = json.loads((tmp_path / "server.json").read_text())["connections"][0]
    assert conn["sockopt"] == {"priority": 65546, "tos": 184, "pacing_bytes_s": 12_500_000, "congestion": cc}
    assert conn["requests"] >= s["fetches"]


def test_a_refused_socket_option_ends_the_server_with_one_line(lab: Lab) -> None:
    p = lab.run("fetch-server", "--bind", f"{lab.ns_ip}:0", "--sockopt", "cc=nosuchcc", inside=True)
    assert p.returncode == 1 and "TCP_CONGESTION" in _one_line(p.stderr) and p.stdout == "", p.stderr


# --- ping-pong ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("poll", ["block", "spin"])
@pytest.mark.parametrize("size", [64, 65000])
def test_pingpong_records_every_iteration(lab: Lab, tmp_path: Path, size: int, poll: str) -> None:
    srv, addr = lab.start_server("pingpong-server", "--bind", f"{lab.ns_ip}:0", "--out", str(tmp_path / "s.json"))
    try:
        p = lab.run("pingpong", "--connect", addr, "--size", str(size), "--count", "100", "--warmup", "5",
                    "--poll", poll, "--out", str(tmp_path / "pp.npz"))
    finally:
        rc, _, err = _stop(srv)
    assert p.returncode == 0 and rc == 0, (p.stderr, err)
    s = _summary(p.stdout)
    assert (s["iterations"], s["measured"], s["size"]) == (105, 100, size)
    assert s["half_rtt_us"]["mean"] == pytest.approx(s["rtt_us"]["mean"] / 2)
    d = np.load(tmp_path / "pp.npz")
    assert d["rtt_ns"].size == d["start_ns"].size == 105 and np.all(d["rtt_ns"] > 0)
    assert np.all(np.diff(d["start_ns"]) >= d["rtt_ns"][:-1])  # closed loop: the next starts after the reply
    conn = json.loads((tmp_path / "s.json").read_text())["connections"][0]
    assert conn["requests"] == 105 and conn["size"] == size and conn["end"] == "closed"


def test_pingpong_duration_and_sigterm(lab: Lab, tmp_path: Path) -> None:
    srv, addr = lab.start_server("pingpong-server", "--bind", f"{lab.ns_ip}:0")
    try:
        p = lab.run("pingpong", "--connect", addr, "--size", "1024", "--duration", "0.3", "--out",
                    str(tmp_path / "a.npz"))
        assert p.returncode == 0, p.stderr
        s = _summary(p.stdout)
        assert s["stopped"] == "done" and s["measured"] > 0 and s["warmup"] == 20
        client = subprocess.Popen(lab.argv("pingpong", "--connect", addr, "--size", "1024", "--duration", "600",
                                           "--out", str(tmp_path / "b.npz"), inside=False), cwd=ROOT, env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        rc, out, err = _stop(client, signal.SIGINT)
    finally:
        src, _, serr = _stop(srv)
    assert rc == 0 and "Traceback" not in err, err
    s = _summary(out)
    assert s["stopped"] == "SIGINT" and s["iterations"] == np.load(tmp_path / "b.npz")["rtt_ns"].size > 0
    assert src == 0, serr


# --- bulk --------------------------------------------------------------------------------------------------
def test_bulk_streams_to_duration_deliver_every_byte(lab: Lab, tmp_path: Path) -> None:
    recv, addr = lab.start_server("bulk-receiver", "--bind", f"{lab.root_ip}:0", "--out", str(tmp_path / "r.npz"),
                                  "--interval-ms", "50", "--streams", "3", inside=False)
    try:
        p = lab.run("bulk-sender", "--connect", addr, "--streams", "3", "--duration", "1", "--chunk", "256k",
                    "--sockopt", "prio=65547,cc=cubic", "--out", str(tmp_path / "s.json"), inside=True)
        out, err = recv.communicate(timeout=60)  # ends by itself once all three streams closed
    finally:
        if recv.poll() is None:
            recv.kill()
    assert p.returncode == 0, p.stderr
    assert recv.returncode == 0 and out == "" and "Traceback" not in err, err
    s = _summary(p.stdout)
    assert s["streams"] == 3 and s["stopped"] == "done" and s["sockopt"]["priority"] == 65547
    d = np.load(tmp_path / "r.npz")
    assert d["bytes"].shape[0] == 3 and int(d["interval_ns"]) == 50_000_000
    assert np.array_equal(d["bytes"].sum(axis=1), d["total"])
    assert sorted(d["total"].tolist()) == sorted(s["bytes"])  # what was sent arrived, per stream
    assert np.all(d["closed_ns"] > 0) and np.all(d["first_ns"] <= d["last_ns"])
    assert json.loads(str(d["meta"]))["stopped"] == "done"


def test_sigterm_to_the_bulk_receiver_still_writes_its_file(lab: Lab, tmp_path: Path) -> None:
    recv, addr = lab.start_server("bulk-receiver", "--bind", f"{lab.root_ip}:0", "--out", str(tmp_path / "r.npz"),
                                  inside=False)
    sender = subprocess.Popen(lab.argv("bulk-sender", "--connect", addr, "--streams", "2", "--duration", "600",
                                       inside=True), cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        rc, out, err = _stop(recv)
        assert rc == 0 and out == "" and "Traceback" not in err, err
        d = np.load(tmp_path / "r.npz")
        assert d["bytes"].shape[0] == 2 and np.all(d["total"] > 0)
        assert np.array_equal(d["bytes"].sum(axis=1), d["total"]) and np.all(d["closed_ns"] == -1)
        assert json.loads(str(d["meta"]))["stopped"] == "SIGTERM"
        # the sender finds its peer gone (exit 1, one line) or is stopped by SIGTERM (exit 0): never a traceback
        try:
            sout, serr = sender.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            _, sout, serr = _stop(sender)
        assert sender.returncode in (0, 1) and "Traceback" not in serr, serr
        assert _summary(sout)["streams"] == 2
        if sender.returncode == 1:
            _one_line(serr)
    finally:
        for p in (recv, sender):
            if p.poll() is None:
                p.kill()
