"""The arena process: a child that owns the mapping and does only what the parent tells it.

The parent moves this child between memory cgroups and reads its /proc files; the child maps, populates,
advises and re-touches the arena on command. Keeping measurement in the parent means the measuring code's
own allocations are never charged to the squeezed cgroup.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from harness.knobs import workers
from kernel_vm.arena import Arena

CALL_TIMEOUT_S = 600.0


class ArenaDied(RuntimeError):
    """The arena process is gone mid-command (the memcg OOM killer ends it when its group's limit cannot be met)."""


def _serve(conn: Connection, n_bytes: int, block_bytes: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends us
    try:
        arena = Arena(n_bytes, block_bytes)
    except Exception as exc:  # reported to the parent, which raises it there
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", {"address": arena.address, "pid": os.getpid(), "page_bytes": arena.page_bytes}))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        try:
            if op == "populate":
                arena.populate(args)
                conn.send(("ok", None))
            elif op == "madvise":
                blocks, advice = args
                conn.send(("ok", arena.madvise(blocks, advice)))
            elif op == "calls":
                conn.send(("ok", arena.run_calls(args)))
            elif op == "touch":
                conn.send(("ok", arena.touch(args)))
            elif op == "exit":
                conn.send(("ok", None))
                return
            else:
                conn.send(("error", f"unknown op {op!r}"))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ArenaProcess:
    """Parent-side handle of the arena child (forked, so nothing is re-imported; a journaled worker)."""

    def __init__(self, n_bytes: int, block_bytes: int) -> None:
        self._conn, child = mp.get_context("fork").Pipe()
        # dies with kvds (a SIGKILLed bench must not leave it holding swapped pages in kvds's cgroups) and is
        # journaled, so `kvds restore` ends it before swapoff and cgroup removal
        self._proc = workers.fork(_serve, (child, n_bytes, block_bytes), f"arena process ({n_bytes >> 20} MiB)")
        child.close()
        info = self._reply()
        self.pid: int = info["pid"]
        self.address: int = info["address"]
        self.page_bytes: int = info["page_bytes"]
        self.n_bytes = n_bytes

    def _reply(self) -> Any:
        if not self._conn.poll(CALL_TIMEOUT_S):
            raise TimeoutError("arena process did not answer")
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise ArenaDied(f"arena process died (exit code {self._proc.exitcode})") from None
        if status != "ok":
            raise RuntimeError(f"arena process: {value}")
        return value

    def call(self, op: str, args: Any = None) -> Any:
        self._conn.send((op, args))
        return self._reply()

    def populate(self, blocks: np.ndarray) -> None:
        self.call("populate", blocks)

    def madvise(self, blocks: np.ndarray, advice: int) -> list[str]:
        return self.call("madvise", (blocks, advice))

    def touch(self, blocks: np.ndarray) -> np.ndarray:
        return self.call("touch", blocks)

    def alive(self) -> bool:
        """False once the child is gone (the OOM killer ends it when its group's limit cannot be met)."""
        return self._proc.is_alive()

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self.call("exit")
            except (OSError, RuntimeError, TimeoutError):
                pass
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
        self._conn.close()

    def __enter__(self) -> "ArenaProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
