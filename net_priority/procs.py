"""Starting the endpoints (net_priority/endpoint/) inside the lab's namespaces as journaled workers that die with
kvds, and keeping every command line so a run can show what it ran."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

from harness.knobs import workers

READY_TIMEOUT_S = 60.0  # a Python endpoint starts in 0.1 s here, in seconds in the TCG guest lab
STOP_TIMEOUT_S = 15.0


class EndpointFailed(RuntimeError):
    """An endpoint that did not start, finish or stop as it should: a failed run (exit 1), not bad input."""


RT_ROLES = ("fetch-server", "fetcher", "pingpong-server", "pingpong")
RT_PRIORITY = 10  # SCHED_FIFO priority of the request/response endpoints with rt=True (chrt; below kernel threads')


def endpoint_argv(ns: str, role: str, args: list[str], rt: bool = False) -> list[str]:
    """`ip netns exec NS [chrt -f 10] python -m net_priority.endpoint ROLE ...`. rt: the request/response
    endpoints run SCHED_FIFO, so the lab's own CPU work (the bulk endpoints copying through a veth on this host's
    CPUs) does not queue the decode-critical path behind it; the unloaded reference runs the same way."""
    chrt = ["chrt", "-f", str(RT_PRIORITY)] if rt and role in RT_ROLES else []
    return ["ip", "netns", "exec", ns, *chrt, sys.executable, "-m", "net_priority.endpoint", role, *args]


@dataclass
class Commands:
    """Every command started, in order (shown with --verbose, stored in the summary)."""
    lines: list[str] = field(default_factory=list)
    echo: Callable[[str], None] | None = None

    def add(self, argv: list[str]) -> None:
        line = shlex.join(argv)
        self.lines.append(line)
        if self.echo is not None:
            self.echo(f"+ {line}")


def start(ns: str, role: str, args: list[str], cmds: Commands, wait_ready: bool = False,
          rt: bool = False) -> subprocess.Popen:
    """A worker endpoint; with wait_ready, returns once it printed its 'ready' line (a server listening)."""
    argv = endpoint_argv(ns, role, args, rt)
    cmds.add(argv)
    proc = workers.popen(argv, f"net {role} in {ns}", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if wait_ready:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(READY_TIMEOUT_S)
        sel.close()
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("ready"):
            proc.kill()
            err = proc.stderr.read().strip().splitlines()
            raise EndpointFailed(f"net {role} in {ns} did not start: {err[-1] if err else 'no ready line'}")
    return proc


def wait_exit(proc: subprocess.Popen, what: str, timeout: float | None, ok: tuple[int, ...], late: str) -> str:
    """Wait for an endpoint to exit with one of the `ok` statuses; its stdout. Otherwise a failed run."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise EndpointFailed(f"{what} {late}") from None
    if proc.returncode not in ok:
        last = err.strip().splitlines()
        raise EndpointFailed(f"{what} failed (exit {proc.returncode}): {last[-1] if last else 'no message'}")
    return out


def finish(proc: subprocess.Popen, what: str, timeout: float | None = None) -> str:
    """Wait for an endpoint that ends by itself; its stdout (a JSON line). A failure is a failed run."""
    return wait_exit(proc, what, timeout, (0,), f"did not finish in {timeout or 0:.0f} s")


def stop(proc: subprocess.Popen, what: str) -> str:
    """SIGTERM a server or a streaming endpoint and wait for it to write its file."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return wait_exit(proc, what, STOP_TIMEOUT_S, (0, -signal.SIGTERM),
                 f"did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM")


def runq_wait_ns(proc: subprocess.Popen) -> int | None:
    """Nanoseconds an endpoint's threads have waited on a run queue so far (`ip netns exec` and `chrt` exec in
    place, so the pid is the endpoint's)."""
    return runq_wait_pid(proc.pid)


def runq_wait_pid(pid: int) -> int | None:
    """The sum of schedstat's second field over /proc/<pid>/task/*; None when the process is gone or the kernel
    keeps no schedstat."""
    total, seen = 0, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
                seen = True
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return total if seen else None
