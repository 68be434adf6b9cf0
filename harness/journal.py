"""The knob journal: the only way kvds changes kernel state, and the way it is put back.

Write-ahead: before a change, an entry holding what is needed to undo it is appended to an on-disk journal
(one JSON object per line) and fsync'ed; after the change a "done" line may add facts learned from it (the
loop device's name). Restore undoes entries in reverse order; every undo is idempotent and tolerates a change
that never happened (the process died between journaling and acting). A live process restores on normal
exit, on an exception, on SIGINT/SIGTERM (via the CLI) and at interpreter exit; `kvds restore` replays
journals whose owner died.

Each entry names the module that registered its undo ("by"), so the journal imports no knob module: a process
restoring a journal left by a killed kvds imports the modules its entries name.

Worker processes (kind "worker", harness/knobs/workers.py) are ended before any other undo, in every journal
being restored, and journals are restored newest first (a scoped journal's cgroups before the process-wide
journal's swap device): a surviving worker or a still-limited cgroup would make swapoff fail with ENOMEM.
"""

from __future__ import annotations

import atexit
import fcntl
import importlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from harness.paths import journal_dir

UndoFn = Callable[[dict[str, Any]], None]
_UNDO: dict[str, UndoFn] = {}
WORKER_KIND = "worker"
UNNAMED_BY = "harness.knobs"
"""Where the undo of an entry without "by" lives: journals written before entries named their module."""


def undo_handler(kind: str) -> Callable[[UndoFn], UndoFn]:
    """Register the function that reverses one kind of change (see harness/knobs)."""

    def deco(fn: UndoFn) -> UndoFn:
        _UNDO[kind] = fn
        return fn

    return deco


@dataclass
class RestoreReport:
    journal: Path
    undone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _proc_start(pid: int) -> float | None:
    """Start time of a running process; None when it is gone or a zombie (killed, not yet reaped: its journal is
    orphaned already, and init may take its time reaping)."""
    try:
        p = psutil.Process(pid)
        return None if p.status() == psutil.STATUS_ZOMBIE else p.create_time()
    except psutil.Error:
        return None


class Journal:
    """An append-only journal file owned by one process."""

    def __init__(self, path: Path | None = None) -> None:
        d = journal_dir()
        d.mkdir(parents=True, exist_ok=True)
        self.pid = os.getpid()
        self.path = path or d / f"{self.pid}-{time.time_ns()}.jsonl"
        self._lock = threading.RLock()
        self._seq = 0
        self._fh = open(self.path, "a", encoding="utf-8")
        self._append({"op": "open", "pid": self.pid, "start": _proc_start(self.pid), "time": time.time()})
        self.owned_devices: set[str] = set()
        self.owned_kdamonds: set[int] = set()

    def _append(self, obj: dict[str, Any]) -> None:
        self._fh.write(json.dumps(obj, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def record(self, kind: str, undo: dict[str, Any], desc: str) -> int:
        """Append the undo information for a change about to be made; returns its sequence number."""
        if kind not in _UNDO:
            raise ValueError(f"no undo handler for knob kind {kind!r}")
        with self._lock:
            self._seq += 1
            self._append({"op": "do", "seq": self._seq, "kind": kind, "undo": undo, "desc": desc,
                          "by": _UNDO[kind].__module__})
            return self._seq

    def done(self, seq: int, **facts: Any) -> None:
        """Add facts learned from a change (a device name) that its undo needs."""
        with self._lock:
            self._append({"op": "done", "seq": seq, "facts": facts})

    def restore(self) -> RestoreReport:
        with self._lock:
            report = restore_file(self.path, self._fh)
            self._fh.close()
            if not report.failed:
                self.path.unlink(missing_ok=True)
            return report


def _read_entries(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], set[int]]:
    header = None
    entries: dict[int, dict[str, Any]] = {}
    undone: set[int] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line from a crash mid-write: the change it announced was not made
        op = obj.get("op")
        if op == "open":
            header = obj
        elif op == "do":
            entries[obj["seq"]] = {**obj, "facts": {}}
        elif op == "done" and obj.get("seq") in entries:
            entries[obj["seq"]]["facts"].update(obj.get("facts", {}))
        elif op == "undone":
            undone.add(obj["seq"])
    return header, [entries[k] for k in sorted(entries)], undone


def _pending(path: Path, kinds: set[str] | None) -> list[dict[str, Any]]:
    """Not-yet-undone entries, newest first: workers first of all, then every other kind (kinds=None)."""
    _, entries, undone = _read_entries(path)
    todo = [e for e in reversed(entries) if e["seq"] not in undone and (kinds is None or e["kind"] in kinds)]
    return sorted(todo, key=lambda e: e["kind"] != WORKER_KIND)  # stable: newest first within each group


def _undo_of(entry: dict[str, Any]) -> UndoFn:
    """The undo of an entry's kind, importing the module the entry names when this process has not."""
    if entry["kind"] not in _UNDO:
        importlib.import_module(entry.get("by", UNNAMED_BY))
    if entry["kind"] not in _UNDO:
        raise LookupError(f"no undo handler for knob kind {entry['kind']!r} in {entry.get('by', UNNAMED_BY)}")
    return _UNDO[entry["kind"]]


def restore_file(path: Path, fh: Any = None, kinds: set[str] | None = None) -> RestoreReport:
    """Undo every not-yet-undone entry of a journal (only `kinds`, when given), workers first, then newest
    first, marking each as undone. Holds an exclusive lock on the journal, so two restores never race."""
    report = RestoreReport(path)
    own = fh is None
    out = open(path, "a", encoding="utf-8") if own else fh
    fcntl.flock(out.fileno(), fcntl.LOCK_EX)
    try:
        for entry in _pending(path, kinds):
            args = {**entry["undo"], **entry["facts"]}
            try:
                _undo_of(entry)(args)
                report.undone.append(entry["desc"])
                out.write(json.dumps({"op": "undone", "seq": entry["seq"]}) + "\n")
                out.flush()
                os.fsync(out.fileno())
            except Exception as exc:  # keep going: one stuck knob must not leave the others changed
                report.failed.append(f"{entry['desc']}: {exc}")
    finally:
        fcntl.flock(out.fileno(), fcntl.LOCK_UN)
        if own:
            out.close()
    return report


def _created(path: Path) -> float:
    try:
        header, _, _ = _read_entries(path)
        return float(header.get("time") or 0.0) if header else path.stat().st_mtime
    except FileNotFoundError:
        return 0.0  # restored and removed by a concurrent restore: restore_file skips it


def restore_orphans(include_live: bool = False) -> list[RestoreReport]:
    """What `kvds restore` does: end the workers of every orphaned journal, then restore the journals newest
    first; a journal that restored cleanly is deleted. One call leaves the host clean."""
    paths = sorted(orphaned_journals(include_live), key=_created, reverse=True)
    reports = []
    for path in paths:
        try:
            reports.append(restore_file(path, kinds={WORKER_KIND}))
        except FileNotFoundError:
            continue  # a concurrent restore finished it
    by_path = {r.journal: r for r in reports}
    out = []
    for path in paths:
        try:
            rep = restore_file(path)
        except FileNotFoundError:
            continue
        first = by_path.get(path)
        if first is not None:
            rep.undone[:0] = first.undone
            rep.failed[:0] = first.failed
        if not rep.failed:
            path.unlink(missing_ok=True)
        out.append(rep)
    return out


def orphaned_journals(include_live: bool = False) -> Iterator[Path]:
    """Journals whose owning process is gone (or, with include_live, all of them)."""
    d = journal_dir()
    if not d.is_dir():
        return
    for path in sorted(d.glob("*.jsonl")):
        try:
            header, _, _ = _read_entries(path)
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            continue  # restored and removed meanwhile
        if header is None and age < 10 and not include_live:
            continue  # being created right now: its owner has not written the header yet
        if include_live or header is None:
            yield path
            continue
        start = _proc_start(int(header["pid"]))
        if start is None or header.get("start") is None or abs(start - header["start"]) > 1e-3:
            yield path


_current: Journal | None = None
_current_lock = threading.Lock()
_scoped: list[Journal] = []


def get_journal() -> Journal:
    """The innermost scoped journal, else the process-wide one (created on the first change; restored at exit)."""
    global _current
    with _current_lock:
        if _scoped and _scoped[-1].pid == os.getpid():
            return _scoped[-1]
        if _current is None or _current.pid != os.getpid():
            _current = Journal()
            atexit.register(restore_current)
        return _current


def restore_current() -> RestoreReport | None:
    """Undo everything this process changed (idempotent; called by the CLI and at interpreter exit)."""
    global _current
    with _current_lock:
        j, _current = _current, None
    if j is None or j.pid != os.getpid():
        return None
    return j.restore()


class scoped:
    """A journal of its own for a short-lived change (a probe mounting tracefs): restored on leaving,
    without touching what the rest of the process changed."""

    def __enter__(self) -> Journal:
        j = Journal()
        with _current_lock:
            _scoped.append(j)
        return j

    def __exit__(self, *exc: object) -> None:
        with _current_lock:
            j = _scoped.pop()
        report = j.restore()
        if report.failed:
            raise RuntimeError("journal restore failed: " + "; ".join(report.failed))


class session:
    """Context manager: every knob changed inside is restored on leaving, however it is left."""

    def __enter__(self) -> Journal:
        return get_journal()

    def __exit__(self, *exc: object) -> None:
        report = restore_current()
        if report and report.failed:
            raise RuntimeError("journal restore failed: " + "; ".join(report.failed))
