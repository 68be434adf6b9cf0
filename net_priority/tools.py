"""The standard tools' command lines and output parsers (sockperf, iperf3): pure functions, tested on captured
output (tests/data/net/)."""

from __future__ import annotations

import json
import re
from typing import Any

from harness.errors import UserError

ANSI = re.compile(r"\x1b\[[0-9;]*m")
AVG = re.compile(r"avg-latency=([0-9.]+)")
PCT = re.compile(r"percentile\s+([0-9.]+)\s*=\s*([0-9.]+)")
OBS = re.compile(r"Total\s+(\d+)\s+observations")


def sockperf_server(ip: str, port: int) -> list[str]:
    return ["sockperf", "server", "--tcp", "-i", ip, "-p", str(port)]


def sockperf_pingpong(ip: str, port: int, size: int, seconds: float) -> list[str]:
    return ["sockperf", "ping-pong", "--tcp", "-i", ip, "-p", str(port), "-m", str(size), "-t", f"{seconds:g}"]


def parse_sockperf(text: str) -> dict[str, Any]:
    """sockperf ping-pong's summary: avg latency (us; sockperf's "latency" is half the round trip), the
    percentiles it prints (us) and the observation count."""
    clean = ANSI.sub("", text)
    m = AVG.search(clean)
    if m is None:
        raise UserError("sockperf output has no avg-latency line (did the test run?)")
    pct = {f"p{float(q):g}": float(v) for q, v in PCT.findall(clean)}
    obs = OBS.search(clean)
    return {"avg_us": float(m.group(1)), "percentiles_us": pct,
            "observations": int(obs.group(1)) if obs else None, "unit": "us, half round trip"}


def iperf3_server(ip: str, port: int) -> list[str]:
    return ["iperf3", "-s", "-B", ip, "-p", str(port), "-1"]


def iperf3_client(ip: str, port: int, streams: int, seconds: float) -> list[str]:
    return ["iperf3", "-c", ip, "-p", str(port), "-P", str(streams), "-t", f"{seconds:g}", "-J"]


def parse_iperf3(text: str) -> dict[str, Any]:
    """iperf3 -J: the receiver's throughput (Mbit/s) summed over streams, and the sender's retransmits."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"iperf3 output is not JSON: {exc}") from None
    if "error" in doc:
        raise UserError(f"iperf3: {doc['error']}")
    end = doc.get("end", {})
    recv, sent = end.get("sum_received", {}), end.get("sum_sent", {})
    if "bits_per_second" not in recv:
        raise UserError("iperf3 output has no end.sum_received.bits_per_second")
    return {"received_mbit": recv["bits_per_second"] / 1e6, "sent_mbit": sent.get("bits_per_second", 0) / 1e6,
            "retransmits": sent.get("retransmits"), "seconds": recv.get("seconds")}
