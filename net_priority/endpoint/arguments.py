"""The endpoint's command line: one subcommand per role. Numbers through harness.cli_args' types and sizes
through harness.units.parse_size (binary units: 16K = 16384), as every kvds command reads them; errors are one
line, exit status 2 (harness.cli_args.Parser)."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path
from typing import Callable, TypeVar

from harness.cli_args import Parser, nonneg_float, nonneg_int, positive_float, positive_int
from harness.errors import UserError
from harness.units import parse_size
from net_priority import sockopts
from net_priority.endpoint.sockets import CONNECT_TIMEOUT_S, MAX_MESSAGE, MAX_RECORDS
from net_priority.sockopts import SocketClass

PROG = "net_priority.endpoint"
DEFAULT_WARMUP = 20
DEFAULT_SPIN_US = 200.0
DEFAULT_SIZES = [16384, 65536, 262144]
N = TypeVar("N", int, float)


def _at_most(conv: Callable[[str], N], hi: N) -> Callable[[str], N]:
    """A harness.cli_args number type with an upper bound as well."""
    def bounded(text: str) -> N:
        v = conv(text)
        if v > hi:
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {hi}")
        return v
    return bounded


def _addr(text: str, *, bind: bool) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not ADDR:PORT (an IPv4 address and a port)")
    try:
        ip = str(ipaddress.IPv4Address(host))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{host!r} in {text!r} is not an IPv4 address") from None
    lo = 0 if bind else 1
    if not (port.isascii() and port.isdigit()) or not lo <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"port {port!r} in {text!r} is not in {lo}..65535")
    return ip, int(port)


def _bind_addr(text: str) -> tuple[str, int]:
    return _addr(text, bind=True)


def _connect_addr(text: str) -> tuple[str, int]:
    return _addr(text, bind=False)


def _size(text: str) -> int:
    """Bytes (harness.units: 16K = 16384, 1M = 2^20), at most MAX_MESSAGE."""
    try:
        n = parse_size(text)
    except UserError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if n > MAX_MESSAGE:
        raise argparse.ArgumentTypeError(f"size {text!r} is more than {MAX_MESSAGE} bytes")
    return n


def _sizes(text: str) -> list[int]:
    parts = text.split(",")
    if not text.strip() or any(not p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes")
    return [_size(p) for p in parts]


def _sockopt(text: str) -> SocketClass:
    try:
        return sockopts.parse(text)
    except UserError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--sockopt ").removeprefix("--sockopt: ")) from None


def _out_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Traffic endpoints of `kvds net bench` (net_priority/endpoint/).")
    p.add_argument("--stop-on-eof", action="store_true",
                   help="print `pid N` first, and stop (as on SIGTERM) when stdin closes: an endpoint started over "
                        "SSH ends with its session (net_priority/two_hosts.py)")
    sub = p.add_subparsers(dest="role", metavar="ROLE", required=True)

    def common_sockopt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--sockopt", type=_sockopt, default=SocketClass(), metavar="TEXT",
                        help='socket options, e.g. "prio=65546,tos=184,pace=87500000,cc=bbr" (default: none)')

    def amount(sp: argparse.ArgumentParser, what: str) -> None:
        g = sp.add_mutually_exclusive_group(required=True)
        g.add_argument("--count", type=_at_most(positive_int, MAX_RECORDS),
                       help=f"measured {what} (after the warm-up)")
        g.add_argument("--duration", type=positive_float, metavar="S",
                       help="measured seconds (after the warm-up)")

    def server(name: str, what: str) -> None:
        sp = sub.add_parser(name, help=what)
        sp.add_argument("--bind", type=_bind_addr, required=True, metavar="ADDR:PORT")
        common_sockopt(sp)
        sp.add_argument("--out", type=_out_path, metavar="FILE.json", help="per-connection record at exit")

    server("fetch-server", "answer N-byte fetches (the prefill side)")

    sp = sub.add_parser("fetcher", help="open-loop fetches, latency from the intended time (the decode side)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES, metavar="LIST",
                    help="fetch sizes in bytes, comma-separated, drawn uniformly (default 16384,65536,262144)")
    sp.add_argument("--step-ms", type=positive_float, default=5.0, metavar="MS",
                    help="one fetch per decode step (default 5)")
    amount(sp, "fetches")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    common_sockopt(sp)
    sp.add_argument("--seed", type=_at_most(nonneg_int, 2**63 - 1), default=0)
    sp.add_argument("--warmup", type=_at_most(nonneg_int, 10**6), default=DEFAULT_WARMUP,
                    help=f"leading fetches kept in the file but left out of the summary (default {DEFAULT_WARMUP})")
    sp.add_argument("--spin-us", type=nonneg_float, default=DEFAULT_SPIN_US, metavar="US",
                    help=f"spin on the clock for the last US before each intended time (default {DEFAULT_SPIN_US:g}; "
                         "0 = sleep only)")
    sp.add_argument("--connect-timeout", type=positive_float, default=CONNECT_TIMEOUT_S,
                    metavar="S", help=f"retry a refused connect for S seconds (default {CONNECT_TIMEOUT_S:g})")

    server("pingpong-server", "echo each ping-pong message")

    sp = sub.add_parser("pingpong", help="closed-loop ping-pong, per-iteration RTT (the sockperf anchor)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--size", type=_size, required=True, metavar="BYTES")
    amount(sp, "iterations")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    sp.add_argument("--warmup", type=_at_most(nonneg_int, 10**6), default=DEFAULT_WARMUP,
                    help=f"leading iterations kept in the file but left out of the summary (default {DEFAULT_WARMUP})")
    common_sockopt(sp)
    sp.add_argument("--poll", choices=("block", "spin"), default="block",
                    help="wait for the reply in a blocking recv (default, as sockperf) or busy-wait (FIONREAD)")
    sp.add_argument("--connect-timeout", type=positive_float, default=CONNECT_TIMEOUT_S,
                    metavar="S")

    sp = sub.add_parser("bulk-receiver", help="count bytes per stream per interval (the decode side)")
    sp.add_argument("--bind", type=_bind_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    sp.add_argument("--interval-ms", type=positive_float, default=100.0, metavar="MS")
    sp.add_argument("--streams", type=_at_most(positive_int, 4096),
                    help="stop once this many streams connected and all closed (default: when every accepted "
                         "stream closed)")

    sp = sub.add_parser("bulk-sender", help="K parallel streams as fast as the path allows (the prefill side)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--streams", type=_at_most(positive_int, 4096), required=True, metavar="K")
    sp.add_argument("--chunk", type=_size, default=1 << 20, metavar="BYTES", help="bytes per send (default 1M)")
    sp.add_argument("--duration", type=positive_float, required=True, metavar="S")
    common_sockopt(sp)
    sp.add_argument("--out", type=_out_path, metavar="FILE.json", help="per-stream record at exit")
    sp.add_argument("--connect-timeout", type=positive_float, default=CONNECT_TIMEOUT_S,
                    metavar="S")
    return p

