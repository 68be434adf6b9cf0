"""TCP sockets of the endpoints: listening and connecting with the role's socket class applied (and read back),
exact receives, and the --out check every role makes before it starts."""

from __future__ import annotations

import os
import os
import socket
import struct
import time
from pathlib import Path

from harness.errors import UserError
from net_priority.endpoint.lifecycle import EndpointError, say
from net_priority.sockopts import SocketClass, SockoptError

HDR = struct.Struct(">Q")  # a fetch's size, a ping-pong's size: 8 bytes big-endian
MAX_MESSAGE = 64 << 20  # largest fetch / ping-pong message / chunk
MAX_RECORDS = 10**7  # fetches or ping-pong iterations a client keeps in memory (16-24 bytes each)
CONNECT_TIMEOUT_S = 5.0


def check_out(path: Path | None) -> None:
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



def fmt_addr(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def listen(addr: tuple[str, int], cls: SocketClass) -> socket.socket:
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
        raise EndpointError(f"cannot bind {fmt_addr(addr)}: {e.strerror or e}") from None
    return s


def ready(s: socket.socket) -> None:
    say(f"ready {fmt_addr(s.getsockname())}")


def connect(addr: tuple[str, int], cls: SocketClass, timeout_s: float, nodelay: bool) -> socket.socket:
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
                raise EndpointError(f"cannot connect to {fmt_addr(addr)}: connection refused") from None
            time.sleep(0.05)
        except (socket.timeout, TimeoutError):
            s.close()
            raise EndpointError(f"cannot connect to {fmt_addr(addr)}: timed out after {timeout_s:g} s") from None
        except OSError as e:
            s.close()
            raise EndpointError(f"cannot connect to {fmt_addr(addr)}: {e.strerror or e}") from None
        except BaseException:
            s.close()
            raise


def recv_exact(s: socket.socket, view: memoryview, n: int) -> int:
    """Receive exactly n bytes into view[:n]; returns the bytes received before EOF (< n if the peer closed)."""
    got = s.recv_into(view, n)
    while 0 < got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            break
        got += k
    return got


