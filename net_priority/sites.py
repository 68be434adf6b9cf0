"""Where a bench's endpoints run. `LocalSites`: both sides in this host's lab (two network namespaces and one veth
pair, net_priority/veth_lab.py). `two_hosts.RemoteSites`: the prefill side on one host and the decode side on
another, over SSH. bench.py runs every repetition through this one interface, so both placements share each step
of a repetition (start, the bottleneck's counters, run-queue waits, the endpoints' result files, stop)."""

from __future__ import annotations

import subprocess
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from net_priority import procs, veth_lab as labmod
from net_priority.veth_lab import Lab


class Sites(Protocol):
    lab: Lab  # prefill_ns / decode_ns name where each side's endpoints run (a namespace, or a host)

    def start(self, where: str, role: str, args: list[str], cmds: procs.Commands, wait_ready: bool = False,
              rt: bool = False) -> subprocess.Popen: ...

    def stop(self, proc: subprocess.Popen, what: str) -> None: ...

    def finish(self, proc: subprocess.Popen, what: str, timeout: float) -> None: ...

    def runq(self, proc: subprocess.Popen) -> int | None: ...

    def stats(self) -> dict[str, Any]: ...

    def load(self, where: str, path: Path) -> bytes | None: ...

    def scratch(self) -> AbstractContextManager[Path]: ...


class LocalSites:
    """Both sides on this host: endpoints are `ip netns exec` workers, files and counters are read here."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def start(self, where: str, role: str, args: list[str], cmds: procs.Commands, wait_ready: bool = False,
              rt: bool = False) -> subprocess.Popen:
        return procs.start(where, role, args, cmds, wait_ready=wait_ready, rt=rt)

    def stop(self, proc: subprocess.Popen, what: str) -> None:
        procs.stop(proc, what)

    def finish(self, proc: subprocess.Popen, what: str, timeout: float) -> None:
        procs.finish(proc, what, timeout=timeout)

    def runq(self, proc: subprocess.Popen) -> int | None:
        return procs.runq_wait_ns(proc)

    def stats(self) -> dict[str, Any]:
        return labmod.stats(self.lab)

    def load(self, where: str, path: Path) -> bytes | None:
        return path.read_bytes() if path.exists() else None

    def scratch(self) -> AbstractContextManager[Path]:
        return labmod.scratch(self.lab)
