"""Prefill endpoints on one host, decode endpoints on another: `kvds net bench --prefill-host ssh://A --decode-host
ssh://B` (or `--netns-hosts`: two sshd hosts built in network namespaces on this machine, joined by one veth pair,
the "wire"). This host only controls: everything runs on the two hosts over SSH (the `ssh` client, keys only,
BatchMode, known_hosts checked as harness/remote does).

- The prefill host runs the link agent (net_priority/link_agent.py): it finds its interface toward the decode
  host's data address, installs the bottleneck on that interface's egress (the sender: HTB classes chosen by u32
  filters on the DSCP field, since only the mark crosses a wire) through its own knob journal, answers `stats` and
  `runq PID`, and restores when its session closes.
- Each endpoint runs in its own session as `python -m net_priority.endpoint --stop-on-eof ROLE ...`: it prints its
  pid first, and closing the session's stdin stops it as SIGTERM would, so no endpoint outlives the bench.
- The decode host's result files (fetcher, bulk receiver) come back with `cat`; both are on the decode host, so
  the bulk window is measured on the fetcher's clock (one host, one CLOCK_MONOTONIC).
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

from harness.errors import Unavailable, UserError
from harness.knobs import workers
from harness.remote.targets import SshTarget, parse_target
from net_priority.classes import DscpFilter, HtbPlan
from net_priority.config import NetSetup, TwoHosts
from net_priority.procs import READY_TIMEOUT_S, RT_PRIORITY, RT_ROLES, STOP_TIMEOUT_S, Commands, EndpointFailed, \
    wait_exit
from net_priority.veth_lab import Lab

LINK_FIELDS = ("rate_mbit", "qdisc", "leaf", "loss_pct", "classify")  # what the agent needs to shape the link
DEFAULT_ROOT = '"$HOME"/.kvds-remote'  # expanded by the remote shell, as harness/remote's default root


def ssh_argv(t: SshTarget, hosts: TwoHosts, command: str) -> list[str]:
    opts = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=6",
            "-o", f"StrictHostKeyChecking={'accept-new' if hosts.accept_new_host_key else 'yes'}"]
    if hosts.known_hosts:
        opts += ["-o", f"UserKnownHostsFile={hosts.known_hosts}"]
    identity = t.identity or hosts.identity
    if identity:
        opts += ["-i", os.path.expanduser(identity), "-o", "IdentitiesOnly=yes"]
    return ["ssh", *opts, "-p", str(t.port), f"{t.user}@{t.host}", command]


def endpoint_command(python: str, role: str, args: list[str], rt: bool) -> str:
    """The remote shell's command for one endpoint (`chrt -f 10` for the fetch path, as on one host)."""
    chrt = f"chrt -f {RT_PRIORITY} " if rt and role in RT_ROLES else ""
    return f"{chrt}{shlex.quote(python)} -m net_priority.endpoint --stop-on-eof {role} {shlex.join(args)}"


def planned_lab(hosts: TwoHosts, tag: str) -> Lab:
    """What `--dry-run` can name before connecting: the hosts and the decode address. What exists only once the
    run builds it (the --netns-hosts pair, the sender's interface) is named in angle brackets, as the plan prints it."""
    if hosts.netns_lab:
        return Lab(tag, "ssh://root@<netns host 0>", "ssh://root@<netns host 1>", "kvw<tag>p", "kvw<tag>d",
                   "10.253.<n>.1/30", "10.253.<n>.2/30")
    p, d = parse_target(hosts.prefill), parse_target(hosts.decode)
    ip = hosts.decode_ip or "<the decode host's address>"
    return Lab(tag, p.describe(), d.describe(), f"<{p.describe()}'s interface toward {ip}>", "",
               "<its address>", f"{ip}/32")


class LineReader:
    """Lines from a process's stdout, read from its file descriptor with a timeout (a text wrapper's buffer would
    hide a second line from select)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.buf = proc, b""

    def line(self, timeout_s: float) -> str | None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")


def _close_stdin(proc: subprocess.Popen) -> None:
    """End the session's input (the remote side sees EOF); communicate() must not touch it afterwards."""
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.stdin = None


def _last_err(proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    lines = (err or "").strip().splitlines()
    return lines[-1] if lines else "no message"


class RemoteSites:
    """The Sites of net_priority/sites.py on two SSH hosts; `open` starts the link agent, `close` ends it."""

    def __init__(self, hosts: TwoHosts, cfg: NetSetup, plan: Sequence[HtbPlan], filters: Sequence[DscpFilter],
                 cmds: Commands, tag: str) -> None:
        self.hosts, self.cfg, self.cmds, self.tag = hosts, cfg, cmds, tag
        self.plan, self.filters = list(plan), list(filters)
        self.prefill = parse_target(hosts.prefill)
        self.decode = parse_target(hosts.decode)
        assert isinstance(self.prefill, SshTarget) and isinstance(self.decode, SshTarget)
        self.python = hosts.python or sys.executable
        self.decode_ip = hosts.decode_ip or _address_of(self.decode.host)
        self.pids: dict[int, tuple[int, str]] = {}  # local ssh pid -> (the endpoint's pid, its host)
        self.agent: subprocess.Popen | None = None
        self.lab = Lab(tag, self.prefill.describe(), self.decode.describe(), "", "", "", f"{self.decode_ip}/32")

    # -- the two hosts -----------------------------------------------------------------------------------------
    def _target(self, where: str) -> SshTarget:
        if where == self.lab.prefill_ns:
            return self.prefill  # type: ignore[return-value]
        if where == self.lab.decode_ns:
            return self.decode  # type: ignore[return-value]
        raise ValueError(f"no host {where!r} in this two-host bench")

    def _sudo(self, t: SshTarget) -> str:
        """Root (sudo -n for another login), inside --remote-netns when given."""
        netns = f"ip netns exec {shlex.quote(self.hosts.netns)} " if self.hosts.netns else ""
        return ("sudo -n " if t.needs_sudo else "") + netns

    def _root(self, side: str) -> str:
        root = shlex.quote(self.hosts.root) if self.hosts.root else DEFAULT_ROOT
        return f"{root}/net-{side}"

    def run(self, where: str, command: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
        argv = ssh_argv(self._target(where), self.hosts, command)
        self.cmds.add(argv)
        try:
            return subprocess.run(argv, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EndpointFailed(f"{where}: `{command}` did not finish in {timeout_s:g} s") from None

    # -- the link agent ----------------------------------------------------------------------------------------
    def open(self) -> "RemoteSites":
        setup = {"link": {k: getattr(self.cfg, k) for k in LINK_FIELDS},
                 "plan": [p.__dict__ for p in self.plan], "filters": [f.__dict__ for f in self.filters]}
        root = self._root("prefill")
        sudo = self._sudo(self.prefill)  # type: ignore[arg-type]
        cmd = (f"mkdir -p {root} && exec {sudo}env KVDS_STATE_DIR={root}/state "
               f"KVDS_WORK_DIR={root}/work {shlex.quote(self.python)} -m net_priority.link_agent "
               f"--peer {shlex.quote(self.decode_ip)} --setup {shlex.quote(json.dumps(setup))}")
        argv = ssh_argv(self.prefill, self.hosts, cmd)  # type: ignore[arg-type]
        self.cmds.add(argv)
        self.agent = workers.popen(argv, f"net link agent on {self.lab.prefill_ns}", stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.agent_out = LineReader(self.agent)
        line = self.agent_out.line(READY_TIMEOUT_S)
        if line is None or not line.startswith("ready "):
            code = self.agent.poll()
            why = _last_err(self.agent)
            if code == 2:
                raise UserError(f"{self.lab.prefill_ns}: {why}")
            if code == 3:
                raise Unavailable(f"{self.lab.prefill_ns}: {why}")
            raise EndpointFailed(f"the link agent on {self.lab.prefill_ns} did not start: {why}")
        link = json.loads(line[len("ready "):])
        self.lab = replace(self.lab, prefill_if=link["ifname"], prefill_addr=f"{link['ip']}/32")
        self.link = link
        return self

    def _ask(self, request: str) -> Any:
        if self.agent is None or self.agent.stdin is None:
            raise EndpointFailed("the link agent is not running")
        try:
            self.agent.stdin.write(request + "\n")
            self.agent.stdin.flush()
        except OSError:
            raise EndpointFailed(f"the link agent on {self.lab.prefill_ns} is gone: {_last_err(self.agent)}") \
                from None
        line = self.agent_out.line(READY_TIMEOUT_S)
        if line is None:
            raise EndpointFailed(f"the link agent on {self.lab.prefill_ns} did not answer {request!r}")
        answer = json.loads(line)
        if isinstance(answer, dict) and "error" in answer:
            raise EndpointFailed(f"the link agent: {answer['error']}")
        return answer

    def close(self) -> None:
        """End the agent's session: it restores its journal (the bottleneck goes) and exits."""
        if self.agent is None:
            return
        agent, self.agent = self.agent, None
        _close_stdin(agent)
        wait_exit(agent, f"the link agent on {self.lab.prefill_ns}", STOP_TIMEOUT_S, (0,),
                  f"did not restore and exit within {STOP_TIMEOUT_S:g} s")

    # -- Sites -------------------------------------------------------------------------------------------------
    def start(self, where: str, role: str, args: list[str], cmds: Commands, wait_ready: bool = False,
              rt: bool = False) -> subprocess.Popen:
        t = self._target(where)
        argv = ssh_argv(t, self.hosts, "exec " + self._sudo(t) + endpoint_command(self.python, role, args, rt))
        cmds.add(argv)
        proc = workers.popen(argv, f"net {role} on {where}", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out = LineReader(proc)
        first = out.line(READY_TIMEOUT_S)
        if first is None or not first.startswith("pid "):
            proc.kill()
            raise EndpointFailed(f"net {role} on {where} did not start: {_last_err(proc)}")
        self.pids[proc.pid] = (int(first.split()[1]), where)
        if wait_ready:
            line = out.line(READY_TIMEOUT_S)
            if line is None or not line.startswith("ready"):
                proc.kill()
                raise EndpointFailed(f"net {role} on {where} did not start: {_last_err(proc)}")
        return proc

    def stop(self, proc: subprocess.Popen, what: str) -> None:
        """Close the endpoint's stdin: it stops as on SIGTERM, writes its file and exits; its session ends."""
        _close_stdin(proc)
        wait_exit(proc, what, STOP_TIMEOUT_S, (0,), f"did not stop within {STOP_TIMEOUT_S:.0f} s of its session's end")

    def finish(self, proc: subprocess.Popen, what: str, timeout: float) -> None:
        """Wait for an endpoint that ends by itself with its stdin left open (closing it would stop it)."""
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
        _close_stdin(proc)
        wait_exit(proc, what, 5.0, (0,), f"did not finish in {timeout:.0f} s")

    def runq(self, proc: subprocess.Popen) -> int | None:
        """The run-queue wait of an endpoint on the prefill host (the agent reads its schedstat); None on the decode
        host (the bulk receiver's is evidence only; the fetcher reads its own)."""
        pid, where = self.pids.get(proc.pid, (None, None))
        return self._ask(f"runq {pid}") if pid is not None and where == self.lab.prefill_ns else None

    def stats(self) -> dict[str, Any]:
        return self._ask("stats")

    def load(self, where: str, path: Path) -> bytes | None:
        done = self.run(where, f"cat {shlex.quote(str(path))}")
        return done.stdout if done.returncode == 0 else None

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """The decode host's directory for the endpoints' result files, removed after the run."""
        d = Path("/tmp") / f"kvds-net-{self.tag}"
        made = self.run(self.lab.decode_ns, f"mkdir -m 700 {shlex.quote(str(d))}")
        if made.returncode != 0:
            raise EndpointFailed(f"{self.lab.decode_ns}: cannot create {d}: {made.stderr.decode().strip()}")
        try:
            yield d
        finally:
            self.run(self.lab.decode_ns, f"rm -rf {shlex.quote(str(d))}")


def _address_of(host: str) -> str:
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve the decode host {host}: {exc.strerror}") from None


@contextmanager
def netns_pair() -> Iterator[TwoHosts]:
    """Two sshd hosts in network namespaces (harness/remote/netns_hosts.py), joined by one veth pair (the wire,
    10.253.<n>.0/30) apart from their control links: the targets of `--netns-hosts`. Journaled like the lab."""
    from harness.knobs.netns import create_veth_between
    from harness.remote.netns_hosts import NetnsLab

    with NetnsLab(2) as lab:
        p, d = lab.hosts
        n = int(lab.token, 16) % 250 + 1
        p_addr, d_addr = f"10.253.{n}.1/30", f"10.253.{n}.2/30"
        create_veth_between(p.netns, f"kvw{lab.token}p", p_addr, d.netns, f"kvw{lab.token}d", d_addr)
        yield TwoHosts(prefill=p.target(), decode=d.target(), decode_ip=d_addr.split("/")[0],
                       identity=str(lab.client_key), known_hosts=str(lab.known_hosts), accept_new_host_key=True,
                       root=str(lab.dir))


@contextmanager
def opened(cfg: NetSetup, plan: Sequence[HtbPlan], filters: Sequence[DscpFilter], cmds: Commands,
           tag: str) -> Iterator[RemoteSites]:
    """The two hosts of cfg.two_hosts (built first with netns_lab), the bottleneck installed on the sender."""
    assert cfg.two_hosts is not None
    with (netns_pair() if cfg.two_hosts.netns_lab else _given(cfg.two_hosts)) as hosts:
        sites = RemoteSites(hosts, cfg, plan, filters, cmds, tag)
        try:
            yield sites.open()
        finally:
            sites.close()


@contextmanager
def _given(hosts: TwoHosts) -> Iterator[TwoHosts]:
    yield hosts
