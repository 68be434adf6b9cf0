"""bulk-sender and bulk-receiver: K parallel TCP streams as fast as the path allows, and the per-stream,
per-interval byte counts the bench turns into bulk throughput."""

from __future__ import annotations

import argparse
import array
import selectors
import socket
from typing import Any

from net_priority import npz, sockopts
from net_priority.endpoint.lifecycle import EndpointError, Signals, Stop, dumps, ended, interruptible, meta_json
from net_priority.endpoint.lifecycle import mono, say, stopped_by, write_json
from net_priority.endpoint.sockets import check_out, connect, fmt_addr, listen, ready
from net_priority.sockopts import SocketClass

ACCEPT_POLL_S = 0.2
RECV_BUF = 1 << 20  # the bulk receiver's buffer



class _Stream:
    __slots__ = ("sock", "peer", "bins", "total", "first_ns", "last_ns", "closed_ns", "error")

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer = sock, peer
        self.bins = array.array("q")
        self.total = 0
        self.first_ns = self.last_ns = self.closed_ns = -1
        self.error: str | None = None


def bulk_receiver(args: argparse.Namespace) -> int:
    check_out(args.out)
    interval_ns = max(1, int(round(args.interval_ms * 1e6)))
    lst = listen(args.bind, SocketClass())
    lst.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lst, selectors.EVENT_READ, None)
    streams: list[_Stream] = []
    open_count = 0
    t0 = -1
    buf = bytearray(RECV_BUF)
    stopped = "done"
    ready(lst)
    try:
        while True:
            if Signals.stop:
                stopped = stopped_by()
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
                    streams.append(_Stream(conn, fmt_addr(peer)))
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
                   meta=meta_json(args, stopped=stopped, peers=[st.peer for st in streams], errors=errors))
    return 0


def _mbit_s(nbytes: int, first: int, last: int) -> float | None:
    return nbytes * 8e3 / (last - first) if last > first else None  # bytes * 8 / ns * 1e9 / 1e6


def bulk_sender(args: argparse.Namespace) -> int:
    check_out(args.out)
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
                s = connect(args.connect, args.sockopt, args.connect_timeout, nodelay=False)
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
            if Signals.stop:
                stopped = stopped_by()
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
        stopped, error = ended(e, "stream send")
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
        write_json(args.out, {**summary, "sockopt_per_stream": held, "args": vars(args) | {"role": args.role}})
    say(dumps(summary, indent=None))
    if error is not None:
        raise EndpointError(error)
    return 0
