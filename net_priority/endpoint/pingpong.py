"""pingpong: the closed-loop client the sockperf anchor compares with (`sockperf ping-pong --tcp`), blocking or
busy-waiting for each reply."""

from __future__ import annotations

import argparse
import array
import fcntl
import socket
import termios
from typing import Callable

from net_priority import npz, sockopts
from net_priority.endpoint.lifecycle import EndpointError, Stop, dumps, ended, interruptible, meta_json, mono, say
from net_priority.endpoint.lifecycle import us_stats
from net_priority.endpoint.sockets import HDR, MAX_RECORDS, check_out, connect



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
    check_out(args.out)
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
            sock = connect(args.connect, args.sockopt, args.connect_timeout, nodelay=True)
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
        stopped, error = ended(e, "ping-pong")
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
              meta=meta_json(args, sockopt_held=held, stopped=stopped, error=error))
    w = min(args.warmup, n)
    m = rt_all[w:]
    say(dumps({"role": "pingpong", "out": str(args.out), "stopped": stopped, "error": error, "size": size,
                "iterations": n, "warmup": w, "measured": len(m), "poll": args.poll, "sockopt": held,
                "rtt_us": us_stats(m), "half_rtt_us": us_stats(m, 0.5)}, indent=None))
    if error is not None:
        raise EndpointError(error)
    return 0

