"""The side-by-side anchor in the same run: what a network engineer would measure with Debian's standard tools on
the same lab, next to kvds's own figure for the same traffic.

* unloaded request/response: `sockperf ping-pong --tcp -m SIZE` against kvds's ping-pong of SIZE both ways
  (closed loop, the same pattern), alternating, ANCHOR_REPS times each; sockperf's latency is half the round
  trip, so kvds's is too. Verdict: the ratio of means within +-10% (harness.stats.judge_within).
* bulk: iperf3 with the bench's stream count against kvds's bulk mover alone, over the same bottleneck.
* loaded: sockperf ping-pong under an iperf3 bulk stream (one class), for the record beside kvds's baseline.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.knobs import workers
from net_priority import veth_lab as labmod, tools
from net_priority.bench import BULK_INTERVAL_MS, bulk_mbit
from net_priority.config import SOCKPERF_MAX, NetSetup
from net_priority.estimates import anchor_ratio
from net_priority.veth_lab import BULK_PORT, IPERF_PORT, PINGPONG_PORT, SOCKPERF_PORT, Lab
from net_priority.procs import Commands, EndpointFailed, finish, start, stop

ANCHOR_REPS = 3
PINGPONG_S = 2.0
BULK_S = 3.0


def _ns(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


def _tool(ns: str, argv: list[str], cmds: Commands, timeout: float) -> str:
    full = _ns(ns, argv)
    cmds.add(full)
    proc = workers.popen(full, f"{argv[0]} in {ns}", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return finish(proc, argv[0], timeout=timeout)


def _server(ns: str, argv: list[str], cmds: Commands) -> subprocess.Popen:
    full = _ns(ns, argv)
    cmds.add(full)
    proc = workers.popen(full, f"{argv[0]} server in {ns}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # neither tool says when it listens; the clients retry below if it was not yet
    if proc.poll() is not None:
        raise EndpointFailed(f"{argv[0]} server in {ns} exited at once (status {proc.returncode})")
    return proc


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _kvds_pingpong(lab: Lab, size: int, work: Path, cmds: Commands) -> float:
    out = work / f"pp-{size}-{time.monotonic_ns()}.npz"
    server = start(lab.prefill_ns, "pingpong-server", ["--bind", f"{lab.prefill_ip}:{PINGPONG_PORT}"], cmds,
                   wait_ready=True)
    try:
        client = start(lab.decode_ns, "pingpong", ["--connect", f"{lab.prefill_ip}:{PINGPONG_PORT}",
                                                   "--size", str(size), "--duration", f"{PINGPONG_S:g}",
                                                   "--out", str(out)], cmds)
        finish(client, "net pingpong", timeout=PINGPONG_S * 5 + 30)
    finally:
        stop(server, "net pingpong-server")
    with np.load(out) as z:
        rtt = z["rtt_ns"][int(z["warmup"]):].astype(float)
    return float(rtt.mean()) / 2 / 1000.0


def _against(server_ns: str, server: list[str], client_ns: str, client: list[str], seconds: float,
             cmds: Commands) -> str:
    """A standard tool's client output against its own server, started for it and ended after it."""
    proc = _server(server_ns, server, cmds)
    try:
        return _tool(client_ns, client, cmds, timeout=seconds * 5 + 30)
    finally:
        _kill(proc)


def _sockperf(lab: Lab, size: int, cmds: Commands) -> dict[str, Any]:
    return tools.parse_sockperf(_against(lab.prefill_ns, tools.sockperf_server(lab.prefill_ip, SOCKPERF_PORT),
                                         lab.decode_ns, tools.sockperf_pingpong(lab.prefill_ip, SOCKPERF_PORT, size,
                                                                                PINGPONG_S), PINGPONG_S, cmds))


def _iperf3(lab: Lab, streams: int, cmds: Commands) -> dict[str, Any]:
    return tools.parse_iperf3(_against(lab.decode_ns, tools.iperf3_server(lab.decode_ip, IPERF_PORT),
                                       lab.prefill_ns, tools.iperf3_client(lab.decode_ip, IPERF_PORT, streams, BULK_S),
                                       BULK_S, cmds))


def _kvds_bulk(cfg: NetSetup, lab: Lab, work: Path, cmds: Commands) -> float | None:
    out = work / f"bulk-alone-{time.monotonic_ns()}.npz"
    receiver = start(lab.decode_ns, "bulk-receiver", ["--bind", f"{lab.decode_ip}:{BULK_PORT}", "--out", str(out),
                                                     "--interval-ms", str(BULK_INTERVAL_MS)], cmds, wait_ready=True)
    try:
        t0 = time.monotonic_ns()
        sender = start(lab.prefill_ns, "bulk-sender", ["--connect", f"{lab.decode_ip}:{BULK_PORT}",
                                                      "--streams", str(cfg.bulk_streams), "--chunk",
                                                      str(cfg.bulk_chunk), "--duration", f"{BULK_S:g}"], cmds)
        finish(sender, "net bulk-sender", timeout=BULK_S * 5 + 30)
        t1 = time.monotonic_ns()
    finally:
        stop(receiver, "net bulk-receiver")
    return bulk_mbit(out.read_bytes() if out.exists() else None, t0, t1)


def run(cfg: NetSetup, lab: Lab, cmds: Commands) -> dict[str, Any]:
    smallest = min(cfg.sizes)  # the anchor's size, and the smallest fetch's if sockperf can send it
    sizes = sorted({cfg.anchor_size} | ({smallest} if smallest <= SOCKPERF_MAX else set()))
    out: dict[str, Any] = {"reps": ANCHOR_REPS, "pingpong": {}, "unit": "us, half round trip"}
    with labmod.scratch(lab) as work:
        for size in sizes:
            kv, sp, docs = [], [], []
            for r in range(ANCHOR_REPS):  # alternating: kvds first on even repetitions
                for who in (("kvds", "sockperf") if r % 2 == 0 else ("sockperf", "kvds")):
                    if who == "kvds":
                        kv.append(_kvds_pingpong(lab, size, work, cmds))
                    else:
                        d = _sockperf(lab, size, cmds)
                        docs.append(d)
                        sp.append(d["avg_us"])
            out["pingpong"][str(size)] = {"kvds_mean_us": kv, "sockperf_avg_us": sp, "sockperf": docs,
                                          **anchor_ratio(kv, sp)}
        ip = _iperf3(lab, cfg.bulk_streams, cmds)
        kb = _kvds_bulk(cfg, lab, work, cmds)
        out["bulk"] = {"iperf3": ip, "kvds_mbit": kb, "rate_mbit": cfg.rate_mbit,
                       "kvds_over_iperf3": kb / ip["received_mbit"] if kb and ip["received_mbit"] else None}
        out["loaded"] = _loaded(cfg, lab, cmds)
    return out


def _loaded(cfg: NetSetup, lab: Lab, cmds: Commands) -> dict[str, Any]:
    """sockperf ping-pong at the anchor size while iperf3 streams over the same bottleneck (one class)."""
    server = _server(lab.decode_ns, tools.iperf3_server(lab.decode_ip, IPERF_PORT), cmds)
    bulk_argv = _ns(lab.prefill_ns, tools.iperf3_client(lab.decode_ip, IPERF_PORT, cfg.bulk_streams,
                                                        PINGPONG_S + 2))
    cmds.add(bulk_argv)
    bulk = workers.popen(bulk_argv, "iperf3 client", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)
        sp = _sockperf(lab, cfg.anchor_size, cmds)
        ip = tools.parse_iperf3(finish(bulk, "iperf3", timeout=PINGPONG_S * 5 + 30))
    finally:
        _kill(bulk)
        _kill(server)
    return {"size": cfg.anchor_size, "sockperf": sp, "iperf3": ip}
