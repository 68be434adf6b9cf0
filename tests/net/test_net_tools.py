"""The standard tools' parsers on captured output (sockperf 3.7 ping-pong, iperf3 3.12 -J, from this host's lab)."""

from pathlib import Path

import pytest

from harness.errors import UserError
from tests.conftest import REPO
from net_priority import tools

DATA = REPO / "tests" / "data" / "net"


def test_sockperf_pingpong_summary_is_read_through_its_colour_codes() -> None:
    d = tools.parse_sockperf((DATA / "sockperf-pingpong-16k.txt").read_text())
    assert d["avg_us"] == pytest.approx(14.076)
    assert d["percentiles_us"]["p99"] == pytest.approx(57.780)
    assert d["percentiles_us"]["p50"] == pytest.approx(11.632)
    assert d["percentiles_us"]["p99.999"] == pytest.approx(913.261)
    assert d["observations"] == 54980


def test_sockperf_output_without_a_result_is_refused() -> None:
    with pytest.raises(UserError, match="avg-latency"):
        tools.parse_sockperf("sockperf: ERROR: connect() failed\n")


def test_iperf3_json_gives_the_receivers_throughput() -> None:
    d = tools.parse_iperf3((DATA / "iperf3-2streams.json").read_text())
    assert d["received_mbit"] == pytest.approx(12981.794, rel=1e-6)
    assert d["sent_mbit"] >= d["received_mbit"]
    assert isinstance(d["retransmits"], int)


def test_iperf3_error_document_and_garbage_are_refused() -> None:
    with pytest.raises(UserError, match="unable to connect"):
        tools.parse_iperf3('{"start": {}, "error": "unable to connect to server"}')
    with pytest.raises(UserError, match="not JSON"):
        tools.parse_iperf3("iperf3: error")


def test_command_lines_are_what_the_summary_shows() -> None:
    assert tools.sockperf_pingpong("10.0.0.1", 7304, 16384, 2.0) == [
        "sockperf", "ping-pong", "--tcp", "-i", "10.0.0.1", "-p", "7304", "-m", "16384", "-t", "2"]
    assert tools.iperf3_client("10.0.0.2", 7305, 2, 3.0)[-3:] == ["-t", "3", "-J"]
