"""Worker processes that die with their kvds process, and that `kvds restore` ends before undoing anything.

A worker (the VM track's arena child, the I/O track's ioload reader and writer) holds memory charged to kvds's
cgroups, swapped-out pages and open devices. While it lives its cgroup cannot be removed, and swapoff must
bring its pages back into a group still at its limit (ENOMEM). So two safeguards:
- the child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG, set first thing in the child,
  and the child ends itself if the parent already died before that);
- the parent journals the child's pid and start time (kind "worker"), and every restore ends journaled
  workers before any other undo (harness/journal.py), so a survivor cannot hold up swapoff or rmdir.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits: spawn workers from a thread that lives as
long as they should (kvds spawns them from its main thread).

A long child that another thread waits on (a QEMU guest behind `--target guest`, harness/remote/execute.py) needs
one more: on SIGINT/SIGTERM the main thread unwinds into the thread pool's shutdown, which joins that thread, which
waits for the child, so kvds would wait for the guest to finish. Such a child is started with `popen_waited`, and
the pool's owner calls `end_waited` on its way out: every one is killed (and none starts after), so the threads
return at once and the journal is restored as usual.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Sequence

import psutil

from harness.journal import WORKER_KIND, get_journal, undo_handler

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl  # resolved here, not in a freshly forked child (preexec_fn should do as little as it can)
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_prctl.restype = ctypes.c_int
KILL_WAIT_S = 30.0


def die_with_parent(parent_pid: int) -> None:
    """In a freshly forked child: SIGKILL when the parent dies; if it already died, die now."""
    if _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
    if os.getppid() != parent_pid:  # the parent died between fork and prctl: nobody will signal us
        os.kill(os.getpid(), signal.SIGKILL)


def dies_with_me() -> Callable[[], None]:
    """A preexec_fn for subprocess.run/Popen of a short helper (fio) that needs no journal record: the child
    dies with this process."""
    parent = os.getpid()
    return lambda: die_with_parent(parent)


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class _Record:
    """Journal a worker before it exists (its pid follows in the 'done' line once it is known)."""

    def __init__(self, what: str) -> None:
        self.journal = get_journal()
        self.seq = self.journal.record(WORKER_KIND, {"what": what}, f"worker {what}")

    def started(self, pid: int) -> None:
        self.journal.done(self.seq, pid=pid, start=_start_time(pid))


def popen(argv: Sequence[str], what: str, **kw: Any) -> subprocess.Popen:
    """subprocess.Popen of a worker that dies with this process and is journaled (restore ends it)."""
    rec = _Record(what)
    proc = subprocess.Popen(list(argv), preexec_fn=dies_with_me(), **kw)
    rec.started(proc.pid)
    return proc


def _child_main(parent: int, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    die_with_parent(parent)
    target(*args)


def fork(target: Callable[..., Any], args: tuple[Any, ...], what: str) -> mp.Process:
    """A forked multiprocessing worker running target(*args), dying with this process, journaled."""
    ctx = mp.get_context("fork")
    rec = _Record(what)
    proc = ctx.Process(target=_child_main, args=(os.getpid(), target, args), daemon=True)
    proc.start()
    rec.started(proc.pid)
    return proc


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE  # exited: its memory and swap are already released
    except psutil.NoSuchProcess:
        return True


@undo_handler(WORKER_KIND)
def _undo_worker(a: dict[str, Any]) -> None:
    """End the worker if it still runs (same pid *and* start time: never a stranger that reused the pid)."""
    pid, start = a.get("pid"), a.get("start")
    if pid is None:
        return  # died between journaling and fork: there was no worker, or it died with its parent
    try:
        p = psutil.Process(int(pid))
        if start is not None and abs(p.create_time() - float(start)) > 1e-3:
            return
        p.kill()
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + KILL_WAIT_S
    while not _gone(p):
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {a.get('what')} (pid {pid}) still alive {KILL_WAIT_S:.0f} s after SIGKILL")
        time.sleep(0.02)


class Ended(Exception):
    """A child started with popen_waited was killed by end_waited: kvds is on its way out (SIGINT/SIGTERM)."""


class _Waited:
    """The children popen_waited started, those end_waited killed, and whether kvds is on its way out."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.killed: set[subprocess.Popen] = set()
        self.ending = False


_WAITED = _Waited()


def popen_waited(argv: Sequence[str], what: str, **kw: Any) -> subprocess.Popen:
    """subprocess.Popen of a long child (QEMU) that dies with this process and that end_waited kills; release it
    once waited for. Raises Ended when kvds is already on its way out, so no child starts after end_waited."""
    with _WAITED.lock:
        if _WAITED.ending:
            raise Ended(f"{what} not started: kvds is exiting (SIGINT/SIGTERM)")
        proc = subprocess.Popen(list(argv), preexec_fn=dies_with_me(), **kw)
        _WAITED.live.add(proc)
    return proc


def release(proc: subprocess.Popen) -> bool:
    """Forget a child popen_waited started (it has exited); True when end_waited is what ended it."""
    with _WAITED.lock:
        _WAITED.live.discard(proc)
        killed = proc in _WAITED.killed
        _WAITED.killed.discard(proc)
    return killed


def end_waited() -> int:
    """Kill every child popen_waited started that still runs, and refuse new ones until reopen_waited; how many were
    killed. Called by the owner of the threads that wait on them, before it joins those threads."""
    with _WAITED.lock:
        _WAITED.ending = True
        procs = [p for p in _WAITED.live if p.poll() is None]
        _WAITED.killed.update(procs)
    for p in procs:
        try:
            p.kill()
        except ProcessLookupError:  # exited (and was reaped) in between
            pass
    return len(procs)


def reopen_waited() -> None:
    """Allow popen_waited again (after the threads that end_waited cut short have been joined)."""
    with _WAITED.lock:
        _WAITED.ending = False
