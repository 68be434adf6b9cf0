"""Progress bars for long work (rich), silent when output is not a terminal or JSON is requested."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_quiet = False
console = Console(stderr=True)
STATUS_LINES_ENV = "KVDS_STATUS_LINES"
"""Set (to 1): `say` prints its status lines on stderr even under --json, each on one line. The guest target sets it, so the host can
relay a guest command's progress while the guest runs (harness/remote/guest.py); stdout stays pure JSON."""


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


class _Bar:
    def __init__(self, progress: Progress | None, task: int | None) -> None:
        self._p, self._t = progress, task

    def advance(self, n: float = 1) -> None:
        if self._p is not None:
            self._p.advance(self._t, n)

    def update(self, description: str | None = None, completed: float | None = None) -> None:
        if self._p is not None:
            kw = {k: v for k, v in (("description", description), ("completed", completed)) if v is not None}
            self._p.update(self._t, **kw)


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty() and os.environ.get("KVDS_NO_PROGRESS") is None


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[_Bar]:
    """A progress bar on stderr; with total=None an elapsed-time spinner."""
    if not enabled():
        yield _Bar(None, None)
        return
    cols = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*cols, console=console, transient=False) as p:
        t = p.add_task(description, total=total)
        yield _Bar(p, t)


def say(message: str) -> None:
    """A status line on stderr (never mixed into --json output on stdout)."""
    relayed = bool(os.environ.get(STATUS_LINES_ENV))  # one line each, never wrapped: the host relays them by line
    if not _quiet or relayed:
        console.print(message, highlight=False, soft_wrap=relayed)
