"""Traffic endpoints of the delivery track, one process per role, run inside the lab's network namespaces
(`ip netns exec NS .venv/bin/python -m net_priority.endpoint ROLE ...`, started by the bench through
harness/knobs/workers.py, so each dies with kvds).

All TCP over IPv4. Clocks are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns`, the clock ioload and kvds's
tracefs instances stamp with); network namespaces share it, so the decode side's fetch times and the bulk
receiver's intervals are on one time axis.

Roles (`--help` on each):
- `fetch-server --bind ADDR:PORT [--sockopt TEXT] [--out FILE.json]`: per request, an 8-byte big-endian size
  N; answers N bytes (its first 8 bytes are N again, big-endian, when N >= 8, so the fetcher can tell an
  answer belongs to its request) from a per-connection preallocated buffer with one `sendall`. Thread per
  connection. The socket class is applied to the listener and to every accepted socket and read back (the
  prefill side's sending sockets are the ones the qdisc sees); a refused option ends the server (exit 1).
- `fetcher --connect ADDR:PORT [--sizes LIST] [--step-ms MS] (--count N | --duration S) --out FILE.npz [--sockopt
  TEXT] [--seed K] [--warmup W] [--spin-us US] [--connect-timeout S]` (defaults: sizes 16384,65536,262144, step 5
  ms, seed 0, warm-up 20, spin 200 us, connect timeout 5 s): open loop on one persistent connection. Fetch i
  (counting the warm-up ones) is intended at t0 + i * step; the fetcher sleeps until `--spin-us` before it, then
  spins on the clock (a late wake-up would be charged to the network), and issues at once when already late (behind
  a slow predecessor). It records intended, issue (just before the request is sent) and done (the answer's last byte
  received) times and the size (drawn uniformly from --sizes with Python's random.Random(--seed).choices).
  Latency = done - intended (includes the wait behind a late predecessor), service = done - issue.
  Warm-up: the first --warmup (default 20) fetches run on the same schedule (the connection's congestion window, the
  server thread and the caches get going) and are kept in the file, but excluded from the summary; `--count` /
  `--duration` count the measured fetches after them (total = warmup + count, or warmup + floor(duration / step)).
- `pingpong-server --bind ADDR:PORT [--sockopt TEXT] [--out FILE.json]` and `pingpong --connect ADDR:PORT --size
  BYTES (--count N | --duration S) --out FILE.npz [--warmup W] [--sockopt TEXT] [--poll block|spin]
  [--connect-timeout S]`: closed-loop ping-pong, BYTES each way (the client names BYTES in an 8-byte header once at
  connect; the server reads a whole message, then sends it back). Per iteration RTT = receive of the reply's last
  byte - start of the send: the like-for-like figure for `sockperf ping-pong --tcp -m BYTES`, whose latency is RTT/2
  (the summary's `half_rtt_us`).
  The default (`--poll block`) sleeps in recv until the reply arrives, as sockperf's default (epoll_wait, then recv)
  sleeps; `--poll spin` busy-waits on FIONREAD instead (the client's vCPU never idles: compare with `sockperf
  ping-pong --nonblocked --timeout 0`). On an idle VM the difference is the vCPU's wake-up.
- `bulk-receiver --bind ADDR:PORT --out FILE.npz [--interval-ms MS] [--streams K]` and `bulk-sender --connect
  ADDR:PORT --streams K --duration S [--chunk BYTES] [--sockopt TEXT] [--out FILE.json] [--connect-timeout S]`
  (interval 100 ms, chunk 1 MiB = bytes per send): K parallel TCP streams from the sender sending as fast as the
  path allows; the receiver (one thread, selectors) counts the bytes each stream delivers per interval. The sender
  stops at --duration or on SIGTERM/SIGINT (closes its streams: what is queued is still delivered, then FIN); the
  receiver stops when every stream closed (all --streams K of them if given, else every accepted one, at least one)
  or on SIGTERM/SIGINT, and always writes its file.

Every server prints `ready ADDR:PORT` (the bound address; `--bind ADDR:0` picks a free port) on stdout, flushed,
once it listens, and nothing else on stdout. Every client prints one JSON line summary on stdout at its end.

Exit statuses: 0 done, also when stopped by SIGTERM/SIGINT (the result file holds what was done: a fetch or
iteration is kept only when complete); 1 the role could not do its job (cannot bind or connect, the peer
closed or reset, a protocol error, the kernel refused a socket option), one line on stderr, result file
still written with what was measured; 2 bad arguments, one line on stderr. Never a traceback.

Result files (written atomically: temporary file in the same directory, then rename):
- fetcher .npz: `intended_ns`, `issue_ns`, `done_ns`, `size` (int64, one entry per completed fetch, warm-up
  first), `warmup` (how many leading entries are warm-up), `step_ns`, `seed`, `meta` (JSON text: role, args,
  socket options read back, why it stopped).
- pingpong .npz: `start_ns`, `rtt_ns` (int64 per completed iteration), `size`, `warmup`, `meta`.
- bulk-receiver .npz: `bytes` (int64, shape [streams, intervals]: bytes received by stream s during interval
  b = [t0_ns + b * interval_ns, + interval_ns), counted when recv returns), `t0_ns` (the first accept),
  `interval_ns`, `end_ns` (when it stopped), per stream `total`, `first_ns` / `last_ns` (first and last
  receive of data, -1 if none), `closed_ns` (EOF, -1 if open when it stopped), `meta`.
- servers' and bulk-sender's `--out` .json: connections with their peer, requests/bytes and the socket options
  read back, why they stopped.
Throughput = bytes / time: a stream's `total` / (`last_ns` - `first_ns`) from the receiver's file, or the bytes of
the intervals inside a window / its length (the fetcher's times are on the same clock); the bulk-sender's
summary gives the bytes it handed to its sockets / its sending time (`mbit_s`).
"""

from __future__ import annotations

import argparse
import array
import dataclasses
import fcntl
import ipaddress
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import termios
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from harness import atomic
from harness.errors import UserError
from net_priority import npz, sockopts
from net_priority.sockopts import SocketClass, SockoptError

PROG = "net_priority.endpoint"
HDR = struct.Struct(">Q")
MAX_MESSAGE = 64 << 20  # largest fetch / ping-pong message / chunk
DEFAULT_WARMUP = 20
DEFAULT_SPIN_US = 200.0
CONNECT_TIMEOUT_S = 5.0
ACCEPT_POLL_S = 0.2
RECV_BUF = 1 << 20  # the bulk receiver's buffer
MAX_RECORDS = 10**7  # fetches or ping-pong iterations a client keeps in memory (16-24 bytes each)
mono = time.monotonic_ns


class EndpointError(Exception):
    """The role could not do its job: one line on stderr, exit status 1."""


class Stop(Exception):
    """SIGTERM/SIGINT arrived while the role was inside an interruptible section."""


# --- signals -----------------------------------------------------------------------------------------------
class _Signals:
    stop = False  # a signal arrived
    signum: int | None = None
    raising = False  # raise Stop from the handler (interrupts a blocking call) instead of only setting the flag


def _on_signal(signum: int, frame: Any) -> None:
    _Signals.stop = True
    _Signals.signum = signum
    if _Signals.raising:
        _Signals.raising = False
        raise Stop()


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside: a signal raises Stop at once (out of recv, sleep, connect). Outside only the flag is set, so
    writing a result file is never cut short."""
    _Signals.raising = True
    try:
        if _Signals.stop:
            raise Stop()
        yield
    finally:
        _Signals.raising = False


def _stopped_by() -> str:
    return signal.Signals(_Signals.signum).name if _Signals.signum else "signal"


# --- output ------------------------------------------------------------------------------------------------
def _ended(e: BaseException, what: str) -> tuple[str, str | None]:
    """How a client's run ended, for its result file: (stopped, error): the signal that stopped it, or the error and
    where it happened (`what`, for an OSError)."""
    if isinstance(e, Stop):
        return _stopped_by(), None
    if isinstance(e, EndpointError):
        return "error", str(e)
    return "error", f"{what}: {getattr(e, 'strerror', None) or e}"


def _say(line: str, stream: Any = None) -> None:
    """One line, flushed; a closed pipe (nobody reads any more) is not an error of the role."""
    stream = stream or sys.stdout
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "as_dict") and callable(obj.as_dict):
        return obj.as_dict()
    return str(obj)  # paths


def dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON without harness.results (which imports NumPy: see net_priority/npz.py for why not here)."""
    return json.dumps(obj, indent=indent, default=_plain, allow_nan=False)


def _write_json(path: Path, obj: Any) -> None:
    atomic.write_text(path, dumps(obj, indent=2) + "\n")


def _meta(args: argparse.Namespace, **extra: Any) -> str:
    d = {"role": args.role, "args": {k: v for k, v in vars(args).items() if k != "role"}, **extra}
    return dumps(d, indent=None)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy.percentile's default method)."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _us_stats(ns: Sequence[int], scale: float = 1.0) -> dict[str, float] | None:
    """The client's end-of-run line: microseconds (x scale) of `ns` (only a glance: the bench reads the files)."""
    if not ns:
        return None
    us = sorted(v * scale / 1e3 for v in ns)
    p50, p90, p99, p999 = (percentile(us, q) for q in (50, 90, 99, 99.9))
    return {"n": len(us), "mean": sum(us) / len(us), "p50": p50, "p90": p90, "p99": p99, "p999": p999,
            "max": us[-1], "min": us[0]}


# --- argument types ----------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        _say(f"{self.prog}: error: {message}", sys.stderr)
        raise SystemExit(2)


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
    """Bytes: a positive integer, optionally with k/K (KiB) or m/M (MiB)."""
    t = text.strip()
    mult = 1
    if t[-1:] in ("k", "K"):
        mult, t = 1024, t[:-1]
    elif t[-1:] in ("m", "M"):
        mult, t = 1 << 20, t[:-1]
    if not (t.isascii() and t.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes (a positive integer, k or M suffix)")
    n = int(t) * mult
    if not 1 <= n <= MAX_MESSAGE:
        raise argparse.ArgumentTypeError(f"size {text!r} is not in 1..{MAX_MESSAGE} bytes")
    return n


def _sizes(text: str) -> list[int]:
    parts = [p for p in text.split(",")]
    if not text.strip() or any(not p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes")
    return [_size(p) for p in parts]


def _finite_float(what: str, ok: Callable[[float], bool], rule: str) -> Callable[[str], float]:
    def conv(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number") from None
        if not (ok(v) and v < float("inf")):
            raise argparse.ArgumentTypeError(f"{what} must be {rule} and finite, got {text!r}")
        return v
    return conv


def _positive_float(what: str) -> Callable[[str], float]:
    return _finite_float(what, lambda v: v > 0, "positive")


def _nonneg_float(what: str) -> Callable[[str], float]:
    return _finite_float(what, lambda v: v >= 0, ">= 0")


def _int_in(what: str, lo: int, hi: int) -> Callable[[str], int]:
    def conv(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be in {lo}..{hi}, got {v}")
        return v
    return conv


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
    p = _Parser(prog=PROG, description="Traffic endpoints of `kvds net bench` (net_priority/endpoint.py).")
    sub = p.add_subparsers(dest="role", metavar="ROLE", required=True)

    def common_sockopt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--sockopt", type=_sockopt, default=SocketClass(), metavar="TEXT",
                        help='socket options, e.g. "prio=65546,tos=184,pace=87500000,cc=bbr" (default: none)')

    def amount(sp: argparse.ArgumentParser, what: str) -> None:
        g = sp.add_mutually_exclusive_group(required=True)
        g.add_argument("--count", type=_int_in("--count", 1, MAX_RECORDS),
                       help=f"measured {what} (after the warm-up)")
        g.add_argument("--duration", type=_positive_float("--duration"), metavar="S",
                       help="measured seconds (after the warm-up)")

    def server(name: str, what: str) -> None:
        sp = sub.add_parser(name, help=what)
        sp.add_argument("--bind", type=_bind_addr, required=True, metavar="ADDR:PORT")
        common_sockopt(sp)
        sp.add_argument("--out", type=_out_path, metavar="FILE.json", help="per-connection record at exit")

    server("fetch-server", "answer N-byte fetches (the prefill side)")

    sp = sub.add_parser("fetcher", help="open-loop fetches, latency from the intended time (the decode side)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--sizes", type=_sizes, default=[16384, 65536, 262144], metavar="LIST",
                    help="fetch sizes in bytes, comma-separated, drawn uniformly (default 16384,65536,262144)")
    sp.add_argument("--step-ms", type=_positive_float("--step-ms"), default=5.0, metavar="MS",
                    help="one fetch per decode step (default 5)")
    amount(sp, "fetches")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    common_sockopt(sp)
    sp.add_argument("--seed", type=_int_in("--seed", 0, 2**63 - 1), default=0)
    sp.add_argument("--warmup", type=_int_in("--warmup", 0, 10**6), default=DEFAULT_WARMUP,
                    help=f"leading fetches kept in the file but left out of the summary (default {DEFAULT_WARMUP})")
    sp.add_argument("--spin-us", type=_nonneg_float("--spin-us"), default=DEFAULT_SPIN_US, metavar="US",
                    help=f"spin on the clock for the last US before each intended time (default {DEFAULT_SPIN_US:g}; "
                         "0 = sleep only)")
    sp.add_argument("--connect-timeout", type=_positive_float("--connect-timeout"), default=CONNECT_TIMEOUT_S,
                    metavar="S", help=f"retry a refused connect for S seconds (default {CONNECT_TIMEOUT_S:g})")

    server("pingpong-server", "echo each ping-pong message")

    sp = sub.add_parser("pingpong", help="closed-loop ping-pong, per-iteration RTT (the sockperf anchor)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--size", type=_size, required=True, metavar="BYTES")
    amount(sp, "iterations")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    sp.add_argument("--warmup", type=_int_in("--warmup", 0, 10**6), default=DEFAULT_WARMUP,
                    help=f"leading iterations kept in the file but left out of the summary (default {DEFAULT_WARMUP})")
    common_sockopt(sp)
    sp.add_argument("--poll", choices=("block", "spin"), default="block",
                    help="wait for the reply in a blocking recv (default, as sockperf) or busy-wait (FIONREAD)")
    sp.add_argument("--connect-timeout", type=_positive_float("--connect-timeout"), default=CONNECT_TIMEOUT_S,
                    metavar="S")

    sp = sub.add_parser("bulk-receiver", help="count bytes per stream per interval (the decode side)")
    sp.add_argument("--bind", type=_bind_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--out", type=_out_path, required=True, metavar="FILE.npz")
    sp.add_argument("--interval-ms", type=_positive_float("--interval-ms"), default=100.0, metavar="MS")
    sp.add_argument("--streams", type=_int_in("--streams", 1, 4096),
                    help="stop once this many streams connected and all closed (default: when every accepted "
                         "stream closed)")

    sp = sub.add_parser("bulk-sender", help="K parallel streams as fast as the path allows (the prefill side)")
    sp.add_argument("--connect", type=_connect_addr, required=True, metavar="ADDR:PORT")
    sp.add_argument("--streams", type=_int_in("--streams", 1, 4096), required=True, metavar="K")
    sp.add_argument("--chunk", type=_size, default=1 << 20, metavar="BYTES", help="bytes per send (default 1M)")
    sp.add_argument("--duration", type=_positive_float("--duration"), required=True, metavar="S")
    common_sockopt(sp)
    sp.add_argument("--out", type=_out_path, metavar="FILE.json", help="per-stream record at exit")
    sp.add_argument("--connect-timeout", type=_positive_float("--connect-timeout"), default=CONNECT_TIMEOUT_S,
                    metavar="S")
    return p


def _check_out(path: Path | None) -> None:
    """Refuse at the start an --out that could not be written at the end (the measurement would be lost)."""
    if path is None:
        return
    if path.is_dir():
        raise UserError(f"--out {path}: is a directory")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {path}: cannot create {parent} ({e.strerror})") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"--out {path}: {parent} is not writable")


# --- sockets -----------------------------------------------------------------------------------------------
def _fmt(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def _listen(addr: tuple[str, int], cls: SocketClass) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        cls.apply(s)  # inherited by accepted sockets (and the SYN-ACK); each accepted one is set and checked again
    except SockoptError as e:
        s.close()
        raise EndpointError(f"cannot apply --sockopt {cls}: {e}") from None
    try:
        s.bind(addr)
        s.listen(128)
    except OSError as e:
        s.close()
        raise EndpointError(f"cannot bind {_fmt(addr)}: {e.strerror or e}") from None
    return s


def _ready(s: socket.socket) -> None:
    _say(f"ready {_fmt(s.getsockname())}")


def _connect(addr: tuple[str, int], cls: SocketClass, timeout_s: float, nodelay: bool) -> socket.socket:
    """One TCP connection with the class applied before connect (the SYN and the first segments carry it) and
    checked again once connected; a refused connect is retried for timeout_s (a server still starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if nodelay:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cls.apply(s)
            s.settimeout(max(0.05, deadline - time.monotonic()))
            s.connect(addr)
            s.settimeout(None)
            cls.check(s)
            return s
        except SockoptError as e:
            s.close()
            raise EndpointError(f"cannot apply --sockopt {cls}: {e}") from None
        except ConnectionRefusedError:
            s.close()
            if time.monotonic() >= deadline:
                raise EndpointError(f"cannot connect to {_fmt(addr)}: connection refused") from None
            time.sleep(0.05)
        except (socket.timeout, TimeoutError):
            s.close()
            raise EndpointError(f"cannot connect to {_fmt(addr)}: timed out after {timeout_s:g} s") from None
        except OSError as e:
            s.close()
            raise EndpointError(f"cannot connect to {_fmt(addr)}: {e.strerror or e}") from None
        except BaseException:
            s.close()
            raise


def _recv_exact(s: socket.socket, view: memoryview, n: int) -> int:
    """Receive exactly n bytes into view[:n]; returns the bytes received before EOF (< n if the peer closed)."""
    got = s.recv_into(view, n)
    while 0 < got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            break
        got += k
    return got


# --- servers -----------------------------------------------------------------------------------------------
class _Server:
    """Accept loop (main thread, polling the stop flag) with a thread per connection."""

    def __init__(self, args: argparse.Namespace, handle: Callable[[socket.socket, dict[str, Any]], None]) -> None:
        self.args, self.handle = args, handle
        self.conns: list[dict[str, Any]] = []
        self.fatal: str | None = None
        self.lock = threading.Lock()

    def _run_conn(self, conn: socket.socket, rec: dict[str, Any]) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self.args.sockopt.apply(conn)
                rec["sockopt"] = sockopts.read(conn).as_dict()  # all four, as the kernel holds them
            except SockoptError as e:
                self.fatal = f"cannot apply --sockopt {self.args.sockopt} to a connection from {rec['peer']}: {e}"
                return
            self.handle(conn, rec)
            rec["end"] = "closed"
        except OSError as e:
            rec["end"] = f"error: {e.strerror or e}"
        except EndpointError as e:
            rec["end"] = f"error: {e}"
        finally:
            rec["end_ns"] = mono()
            conn.close()

    def run(self) -> int:
        lst = _listen(self.args.bind, self.args.sockopt)
        lst.settimeout(ACCEPT_POLL_S)
        bound = _fmt(lst.getsockname())
        _ready(lst)
        stopped = "fatal"
        try:
            while self.fatal is None:
                if _Signals.stop:
                    stopped = _stopped_by()
                    break
                try:
                    conn, peer = lst.accept()
                except (socket.timeout, TimeoutError):
                    continue
                except OSError as e:  # EMFILE and the like: say so, stop
                    self.fatal = f"accept on {_fmt(self.args.bind)}: {e.strerror or e}"
                    break
                conn.settimeout(None)
                rec: dict[str, Any] = {"peer": _fmt(peer), "start_ns": mono(), "requests": 0, "bytes": 0}
                with self.lock:
                    self.conns.append(rec)
                threading.Thread(target=self._run_conn, args=(conn, rec), daemon=True).start()
        finally:
            lst.close()
        if self.args.out is not None:
            with self.lock:
                conns = [dict(c) for c in self.conns]
            _write_json(self.args.out, {"role": self.args.role, "bind": bound,
                                        "sockopt": self.args.sockopt.as_dict(), "stopped": stopped,
                                        "fatal": self.fatal, "connections": conns})
        if self.fatal is not None:
            raise EndpointError(self.fatal)
        return 0


def _fetch_conn(conn: socket.socket, rec: dict[str, Any]) -> None:
    hdr = bytearray(HDR.size)
    hv = memoryview(hdr)
    buf = bytearray(256 << 10)
    mv = memoryview(buf)
    while True:
        got = _recv_exact(conn, hv, HDR.size)
        if got == 0:
            return  # the fetcher closed between requests
        if got < HDR.size:
            raise EndpointError(f"request cut short ({got} of {HDR.size} bytes)")
        size = HDR.unpack_from(hdr)[0]
        if not 1 <= size <= MAX_MESSAGE:
            raise EndpointError(f"request for {size} bytes (not in 1..{MAX_MESSAGE})")
        if size > len(buf):
            buf = bytearray(size)
            mv = memoryview(buf)
        if size >= HDR.size:
            HDR.pack_into(buf, 0, size)
        conn.sendall(mv[:size])
        rec["requests"] += 1
        rec["bytes"] += size


def _pingpong_conn(conn: socket.socket, rec: dict[str, Any]) -> None:
    hdr = bytearray(HDR.size)
    if _recv_exact(conn, memoryview(hdr), HDR.size) < HDR.size:
        raise EndpointError("no ping-pong header")
    size = HDR.unpack_from(hdr)[0]
    if not 1 <= size <= MAX_MESSAGE:
        raise EndpointError(f"ping-pong size {size} not in 1..{MAX_MESSAGE}")
    rec["size"] = size
    buf = bytearray(size)
    mv = memoryview(buf)
    recv_into, sendall = conn.recv_into, conn.sendall
    n = 0
    try:
        while True:
            got = recv_into(mv)
            if got < size:
                if got == 0:
                    return
                while got < size:
                    k = recv_into(mv[got:])
                    if k == 0:
                        raise EndpointError(f"message cut short ({got} of {size} bytes)")
                    got += k
            sendall(buf)
            n += 1
    finally:
        rec["requests"] = n
        rec["bytes"] = n * size


def fetch_server(args: argparse.Namespace) -> int:
    return _Server(args, _fetch_conn).run()


def pingpong_server(args: argparse.Namespace) -> int:
    return _Server(args, _pingpong_conn).run()


# --- fetcher -----------------------------------------------------------------------------------------------
def fetcher(args: argparse.Namespace) -> int:
    _check_out(args.out)
    step_ns = int(round(args.step_ms * 1e6))
    if step_ns < 1:
        raise UserError(f"--step-ms {args.step_ms:g} is below one nanosecond")
    measured = args.count if args.count is not None else int(args.duration * 1e9 // step_ns)
    if measured < 1:
        raise UserError(f"--duration {args.duration:g} s holds no step of {args.step_ms:g} ms")
    total = args.warmup + measured
    if total > MAX_RECORDS:
        raise UserError(f"{total} fetches (warm-up included) is more than {MAX_RECORDS} (shorten --duration/--count)")
    size_list = array.array("q", random.Random(args.seed).choices(args.sizes, k=total))
    requests = {v: HDR.pack(v) for v in args.sizes}
    intended = array.array("q", bytes(8 * total))
    issue = array.array("q", bytes(8 * total))
    done = array.array("q", bytes(8 * total))
    rbuf = bytearray(max(args.sizes))
    rv = memoryview(rbuf)
    spin_ns = int(args.spin_us * 1e3)
    n = 0
    stopped, error, held = "done", None, None
    t0 = 0
    sock: socket.socket | None = None
    try:
        with interruptible():
            sock = _connect(args.connect, args.sockopt, args.connect_timeout, nodelay=True)
            held = sockopts.read(sock).as_dict()
            recv_into, sendall, sleep = sock.recv_into, sock.sendall, time.sleep
            t0 = mono() + 1_000_000  # the schedule starts 1 ms after connecting
            for i in range(total):
                intended[i] = t0 + i * step_ns
            for i in range(total):
                due = intended[i]
                now = mono()
                if now < due:
                    if due - now > spin_ns:
                        sleep((due - now - spin_ns) / 1e9)
                    while mono() < due:
                        pass
                t_issue = mono()
                size = size_list[i]
                sendall(requests[size])
                got = recv_into(rv, size)
                while 0 < got < size:
                    k = recv_into(rv[got:], size - got)
                    if k == 0:
                        got = -got
                        break
                    got += k
                t_done = mono()
                if got != size:
                    raise EndpointError(f"fetch {i}: the server closed after {abs(got)} of {size} bytes")
                if size >= HDR.size and HDR.unpack_from(rbuf)[0] != size:
                    raise EndpointError(f"fetch {i}: the answer names {HDR.unpack_from(rbuf)[0]} bytes, "
                                        f"not the {size} asked for (stream out of step)")
                issue[i] = t_issue
                done[i] = t_done
                n = i + 1
            _close_checked(sock)
    except (Stop, EndpointError, OSError) as e:
        stopped, error = _ended(e, f"fetch {n}")
    finally:
        if sock is not None:
            sock.close()
    del intended[n:], issue[n:], done[n:], size_list[n:]
    npz.write(args.out, intended_ns=npz.int64s(intended), issue_ns=npz.int64s(issue), done_ns=npz.int64s(done),
              size=npz.int64s(size_list), warmup=args.warmup, step_ns=step_ns, seed=args.seed,
              meta=_meta(args, sockopt_held=held, stopped=stopped, error=error, t0_ns=t0, planned=total))
    w = min(args.warmup, n)
    lat = [d - t for d, t in zip(done[w:], intended[w:])]
    svc = [d - t for d, t in zip(done[w:], issue[w:])]
    lag = [t - d for t, d in zip(issue[w:], intended[w:])]
    _say(dumps({"role": "fetcher", "out": str(args.out), "stopped": stopped, "error": error, "fetches": n,
                "planned": total, "warmup": w, "measured": len(lat), "step_ms": args.step_ms,
                "bytes": sum(size_list), "sockopt": held, "latency_us": _us_stats(lat),
                "service_us": _us_stats(svc), "issue_lag_us": _us_stats(lag)}, indent=None))
    if error is not None:
        raise EndpointError(error)
    return 0


def _close_checked(sock: socket.socket) -> None:
    """End the connection: shut our side, then the server must close with nothing more to say (bytes after the
    last answer mean the stream was out of step)."""
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(2.0)
    extra = 0
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            extra += len(b)
    except (socket.timeout, TimeoutError):
        return
    if extra:
        raise EndpointError(f"the server sent {extra} bytes more than asked for")


# --- pingpong ----------------------------------------------------------------------------------------------
PP_CHUNK = 1 << 16  # iterations per preallocated block in --duration mode
NO_DEADLINE = 2**63 - 1


def _short_read(recv_into: Callable[..., int], rv: memoryview, got: int, size: int) -> int:
    """The rest of a message whose first recv returned got < size bytes (0: the peer closed)."""
    while got < size:
        k = recv_into(rv[got:])
        if k == 0:
            raise EndpointError(f"the server closed after {got} of {size} bytes of a reply")
        got += k
    return got


def _pp_block(recv_into: Callable[..., int], sendall: Callable[..., None], sbuf: bytearray, rv: memoryview,
              size: int, st: array.array, rt: array.array, count: int, deadline: int, mono: Callable[[], int] = mono
              ) -> int:
    """Up to count iterations into st/rt[0:count] (preallocated, rt zero: rt[i] is written last, so a nonzero
    rt marks a complete iteration), stopping after the first one that ends at or after deadline. Kept to the
    fewest bytecodes per iteration: this loop is what the sockperf anchor compares."""
    for i in range(count):
        t = mono()
        sendall(sbuf)
        got = recv_into(rv)
        if got < size:
            _short_read(recv_into, rv, got, size)
        e = mono()
        st[i] = t
        rt[i] = e - t
        if e >= deadline:
            return i + 1
    return count


def _spin_readable(sock: socket.socket, fd: int, ibuf: array.array) -> None:
    """Busy-wait until sock has bytes to read: FIONREAD in a loop (0.5 us a try here; a MSG_DONTWAIT recv that
    fails raises BlockingIOError, 1.6 us). FIONREAD stays 0 at EOF, so every 4096 tries a peek tells EOF apart."""
    ioctl, fionread = fcntl.ioctl, termios.FIONREAD
    while True:
        for _ in range(4096):
            ioctl(fd, fionread, ibuf, True)
            if ibuf[0]:
                return
        try:
            if sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                return  # EOF: the recv that follows returns 0
        except BlockingIOError:
            pass


def _pp_spin(recv_into: Callable[..., int], sendall: Callable[..., None], sbuf: bytearray, rv: memoryview,
             size: int, st: array.array, rt: array.array, count: int, deadline: int, mono: Callable[[], int] = mono,
             sock: socket.socket | None = None) -> int:
    """As _pp_block, but the reply is busy-waited for (FIONREAD) instead of sleeping in recv; then recv_into."""
    assert sock is not None
    fd, ibuf = sock.fileno(), array.array("i", [0])
    for i in range(count):
        t = mono()
        sendall(sbuf)
        _spin_readable(sock, fd, ibuf)
        got = recv_into(rv)
        while got < size:
            if got == 0:
                raise EndpointError(f"the server closed after 0 of {size} bytes of a reply")
            _spin_readable(sock, fd, ibuf)
            k = recv_into(rv[got:])
            if k == 0:
                raise EndpointError(f"the server closed after {got} of {size} bytes of a reply")
            got += k
        e = mono()
        st[i] = t
        rt[i] = e - t
        if e >= deadline:
            return i + 1
    return count


def pingpong(args: argparse.Namespace) -> int:
    _check_out(args.out)
    size = args.size
    sbuf = bytearray(size)
    for j in range(0, size, 8):  # a pattern, not zeros (nothing on a veth compresses, but a check might look)
        sbuf[j] = j & 0xFF
    rbuf = bytearray(size)
    rv = memoryview(rbuf)
    blocks: list[tuple[array.array, array.array]] = []  # (start, rtt) blocks, all complete except maybe the last
    stopped, error, held = "done", None, None
    sock: socket.socket | None = None
    loop = _pp_spin if args.poll == "spin" else _pp_block

    def block(count: int, deadline: int) -> int:
        st, rt = array.array("q", bytes(8 * count)), array.array("q", bytes(8 * count))
        blocks.append((st, rt))
        extra = {"sock": sock} if loop is _pp_spin else {}
        done = loop(recv_into, sendall, sbuf, rv, size, st, rt, count, deadline, **extra)
        del st[done:], rt[done:]
        return done

    try:
        with interruptible():
            sock = _connect(args.connect, args.sockopt, args.connect_timeout, nodelay=True)
            held = sockopts.read(sock).as_dict()
            sock.sendall(HDR.pack(size))
            recv_into, sendall = sock.recv_into, sock.sendall
            if args.count is not None:
                block(args.warmup + args.count, NO_DEADLINE)
            else:
                if args.warmup:
                    block(args.warmup, NO_DEADLINE)
                deadline = mono() + int(args.duration * 1e9)
                while block(PP_CHUNK, deadline) == PP_CHUNK:
                    if len(blocks) * PP_CHUNK >= MAX_RECORDS:
                        stopped = f"{MAX_RECORDS} iterations"  # memory, not --duration, ended it
                        break
            sock.shutdown(socket.SHUT_WR)
    except (Stop, EndpointError, OSError) as e:
        stopped, error = _ended(e, "ping-pong")
    finally:
        if sock is not None:
            sock.close()
    st_all, rt_all = array.array("q"), array.array("q")
    for st, rt in blocks:  # a block cut short by a signal or an error: keep its complete iterations (rtt > 0)
        k = next((i for i, v in enumerate(rt) if v <= 0), len(rt))
        st_all.extend(st[:k])
        rt_all.extend(rt[:k])
    n = len(rt_all)
    npz.write(args.out, start_ns=npz.int64s(st_all), rtt_ns=npz.int64s(rt_all), size=size, warmup=args.warmup,
              meta=_meta(args, sockopt_held=held, stopped=stopped, error=error))
    w = min(args.warmup, n)
    m = rt_all[w:]
    _say(dumps({"role": "pingpong", "out": str(args.out), "stopped": stopped, "error": error, "size": size,
                "iterations": n, "warmup": w, "measured": len(m), "poll": args.poll, "sockopt": held,
                "rtt_us": _us_stats(m), "half_rtt_us": _us_stats(m, 0.5)}, indent=None))
    if error is not None:
        raise EndpointError(error)
    return 0


# --- bulk --------------------------------------------------------------------------------------------------
class _Stream:
    __slots__ = ("sock", "peer", "bins", "total", "first_ns", "last_ns", "closed_ns", "error")

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer = sock, peer
        self.bins = array.array("q")
        self.total = 0
        self.first_ns = self.last_ns = self.closed_ns = -1
        self.error: str | None = None


def bulk_receiver(args: argparse.Namespace) -> int:
    _check_out(args.out)
    interval_ns = max(1, int(round(args.interval_ms * 1e6)))
    lst = _listen(args.bind, SocketClass())
    lst.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lst, selectors.EVENT_READ, None)
    streams: list[_Stream] = []
    open_count = 0
    t0 = -1
    buf = bytearray(RECV_BUF)
    stopped = "done"
    _ready(lst)
    try:
        while True:
            if _Signals.stop:
                stopped = _stopped_by()
                break
            if streams and open_count == 0 and (args.streams is None or len(streams) >= args.streams):
                break
            for key, _ in sel.select(timeout=ACCEPT_POLL_S):
                if key.data is None:
                    try:
                        conn, peer = lst.accept()
                    except BlockingIOError:
                        continue
                    conn.setblocking(False)
                    if t0 < 0:
                        t0 = mono()
                    streams.append(_Stream(conn, _fmt(peer)))
                    open_count += 1
                    sel.register(conn, selectors.EVENT_READ, len(streams) - 1)
                    continue
                st = streams[key.data]
                try:
                    k = st.sock.recv_into(buf)
                except BlockingIOError:
                    continue
                except OSError as e:
                    k, st.error = 0, e.strerror or str(e)
                now = mono()
                if k == 0:
                    st.closed_ns = now
                    sel.unregister(st.sock)
                    st.sock.close()
                    open_count -= 1
                    continue
                b = (now - t0) // interval_ns
                if b >= len(st.bins):
                    st.bins.extend(array.array("q", [0]) * (b + 1 - len(st.bins)))
                st.bins[b] += k
                st.total += k
                if st.first_ns < 0:
                    st.first_ns = now
                st.last_ns = now
    finally:
        end_ns = mono()
        for st in streams:
            if st.closed_ns < 0:
                try:
                    st.sock.close()
                except OSError:
                    pass
        lst.close()
        nb = max((len(st.bins) for st in streams), default=0)
        mat = npz.int64_matrix([st.bins for st in streams], nb)
        per = {k: npz.int64s([getattr(st, k) for st in streams]) for k in ("total", "first_ns", "last_ns", "closed_ns")}
        errors = [st.error for st in streams]
        npz.write(args.out, bytes=mat, t0_ns=t0, interval_ns=interval_ns, end_ns=end_ns, **per,
                   meta=_meta(args, stopped=stopped, peers=[st.peer for st in streams], errors=errors))
    return 0


def _mbit_s(nbytes: int, first: int, last: int) -> float | None:
    return nbytes * 8e3 / (last - first) if last > first else None  # bytes * 8 / ns * 1e9 / 1e6


def bulk_sender(args: argparse.Namespace) -> int:
    _check_out(args.out)
    chunk = bytearray(args.chunk)
    mv = memoryview(chunk)
    socks: list[socket.socket] = []
    sent: list[int] = []
    offs: list[int] = []
    held: list[dict[str, Any]] = []
    stopped, error = "done", None
    t_start = t_end = mono()
    sel = selectors.DefaultSelector()
    try:
        with interruptible():
            for _ in range(args.streams):
                s = _connect(args.connect, args.sockopt, args.connect_timeout, nodelay=False)
                held.append(sockopts.read(s).as_dict())
                socks.append(s)
                sent.append(0)
                offs.append(0)
        for i, s in enumerate(socks):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_WRITE, i)
        t_start = mono()
        deadline = t_start + int(args.duration * 1e9)
        size = args.chunk
        while True:
            now = mono()
            if _Signals.stop:
                stopped = _stopped_by()
                break
            if now >= deadline:
                break
            for key, _ in sel.select(timeout=min(ACCEPT_POLL_S, (deadline - now) / 1e9)):
                i = key.data
                try:
                    k = socks[i].send(mv[offs[i]:])
                except BlockingIOError:
                    continue
                sent[i] += k
                offs[i] = (offs[i] + k) % size
    except (Stop, EndpointError, OSError) as e:
        stopped, error = _ended(e, "stream send")
    finally:
        t_end = mono()
        for s in socks:
            try:
                s.close()  # queued data is still delivered, then FIN
            except OSError:
                pass
    summary = {"role": "bulk-sender", "stopped": stopped, "error": error, "streams": len(socks),
               "chunk": args.chunk, "start_ns": t_start, "end_ns": t_end, "bytes": sent, "total": sum(sent),
               "mbit_s": _mbit_s(sum(sent), t_start, t_end), "sockopt": held[0] if held else None}
    if args.out is not None:
        _write_json(args.out, {**summary, "sockopt_per_stream": held, "args": vars(args) | {"role": args.role}})
    _say(dumps(summary, indent=None))
    if error is not None:
        raise EndpointError(error)
    return 0


ROLES: dict[str, Callable[[argparse.Namespace], int]] = {
    "fetch-server": fetch_server, "fetcher": fetcher, "pingpong-server": pingpong_server, "pingpong": pingpong,
    "bulk-receiver": bulk_receiver, "bulk-sender": bulk_sender,
}


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    role = args.role
    try:
        return ROLES[role](args)
    except UserError as e:
        _say(f"{PROG} {role}: error: {e}", sys.stderr)
        return 2
    except EndpointError as e:
        _say(f"{PROG} {role}: {e}", sys.stderr)
        return 1
    except Stop:
        return 0
    except Exception as e:  # a bug: still one line, never a traceback
        _say(f"{PROG} {role}: internal error: {type(e).__name__}: {e}", sys.stderr)
        return 1


if __name__ == "__main__":
    code = main()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)  # connection threads of a server may still sit in recv: do not wait for them
