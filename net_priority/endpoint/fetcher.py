"""fetcher: the decode side's open loop of KV fetches on one persistent connection, latency from the intended
time (see the package docstring for the schedule, the clocks and the file it writes)."""

from __future__ import annotations

import argparse
import array
import random
import socket
import time

from harness.errors import UserError
from net_priority import npz, sockopts
from net_priority.endpoint.lifecycle import EndpointError, Stop, dumps, ended, interruptible, meta_json, mono, say
from net_priority.endpoint.lifecycle import runq_wait_ns, us_stats
from net_priority.endpoint.sockets import HDR, MAX_RECORDS, check_out, connect


def fetcher(args: argparse.Namespace) -> int:
    check_out(args.out)
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
    sent = array.array("q", bytes(8 * total))
    first = array.array("q", bytes(8 * total))
    done = array.array("q", bytes(8 * total))
    rbuf = bytearray(max(args.sizes))
    rv = memoryview(rbuf)
    spin_ns = int(args.spin_us * 1e3)
    n = 0
    stopped, error, held = "done", None, None
    t0 = 0
    runq0 = runq1 = -1
    sock: socket.socket | None = None
    try:
        with interruptible():
            sock = connect(args.connect, args.sockopt, args.connect_timeout, nodelay=True)
            held = sockopts.read(sock).as_dict()
            recv_into, sendall, sleep = sock.recv_into, sock.sendall, time.sleep
            t0 = mono() + 1_000_000  # the schedule starts 1 ms after connecting
            for i in range(total):
                intended[i] = t0 + i * step_ns
            runq0 = runq_wait_ns()
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
                t_sent = mono()
                got = recv_into(rv, size)
                t_first = mono()
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
                sent[i] = t_sent
                first[i] = t_first
                done[i] = t_done
                n = i + 1
            runq1 = runq_wait_ns()  # before the close: the schedule's window, warm-up included
            _close_checked(sock)
    except (Stop, EndpointError, OSError) as e:
        stopped, error = ended(e, f"fetch {n}")
    finally:
        if runq0 >= 0 and runq1 < 0:
            runq1 = runq_wait_ns()
        if sock is not None:
            sock.close()
    del intended[n:], issue[n:], sent[n:], first[n:], done[n:], size_list[n:]
    npz.write(args.out, intended_ns=npz.int64s(intended), issue_ns=npz.int64s(issue), sent_ns=npz.int64s(sent),
              first_ns=npz.int64s(first), done_ns=npz.int64s(done), size=npz.int64s(size_list),
              runq_wait_ns=runq1 - runq0 if min(runq0, runq1) >= 0 else -1, warmup=args.warmup, step_ns=step_ns,
              seed=args.seed,
              meta=meta_json(args, sockopt_held=held, stopped=stopped, error=error, t0_ns=t0, planned=total))
    w = min(args.warmup, n)
    lat = [d - t for d, t in zip(done[w:], intended[w:])]
    svc = [d - t for d, t in zip(done[w:], issue[w:])]
    lag = [t - d for t, d in zip(issue[w:], intended[w:])]
    say(dumps({"role": "fetcher", "out": str(args.out), "stopped": stopped, "error": error, "fetches": n,
                "planned": total, "warmup": w, "measured": len(lat), "step_ms": args.step_ms,
                "bytes": sum(size_list), "sockopt": held, "latency_us": us_stats(lat),
                "service_us": us_stats(svc), "issue_lag_us": us_stats(lag)}, indent=None))
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

