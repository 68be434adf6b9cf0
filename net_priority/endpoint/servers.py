"""fetch-server and pingpong-server: an accept loop with a thread per connection; the prefill side's answers."""

from __future__ import annotations

import argparse
import socket
import threading
from typing import Any, Callable

from net_priority import sockopts
from net_priority.endpoint.lifecycle import EndpointError, Signals, mono, stopped_by, write_json
from net_priority.endpoint.sockets import HDR, MAX_MESSAGE, fmt_addr, listen, ready, recv_exact
from net_priority.sockopts import SockoptError

ACCEPT_POLL_S = 0.2


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
        lst = listen(self.args.bind, self.args.sockopt)
        lst.settimeout(ACCEPT_POLL_S)
        bound = fmt_addr(lst.getsockname())
        ready(lst)
        stopped = "fatal"
        try:
            while self.fatal is None:
                if Signals.stop:
                    stopped = stopped_by()
                    break
                try:
                    conn, peer = lst.accept()
                except (socket.timeout, TimeoutError):
                    continue
                except OSError as e:  # EMFILE and the like: say so, stop
                    self.fatal = f"accept on {fmt_addr(self.args.bind)}: {e.strerror or e}"
                    break
                conn.settimeout(None)
                rec: dict[str, Any] = {"peer": fmt_addr(peer), "start_ns": mono(), "requests": 0, "bytes": 0}
                with self.lock:
                    self.conns.append(rec)
                threading.Thread(target=self._run_conn, args=(conn, rec), daemon=True).start()
        finally:
            lst.close()
        if self.args.out is not None:
            with self.lock:
                conns = [dict(c) for c in self.conns]
            write_json(self.args.out, {"role": self.args.role, "bind": bound,
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
        got = recv_exact(conn, hv, HDR.size)
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
    if recv_exact(conn, memoryview(hdr), HDR.size) < HDR.size:
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


