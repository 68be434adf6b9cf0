"""One shape for every `--json`, so that a reader of one command's output can read them all:

    {"schema": 1, "run": "<the result directory the command filed>" or null, "summary": {...}}

schema: the version of this envelope (raised only when its top level changes; a summary's keys are its command's
own). run: the run directory the command filed, null when it filed none (doctor, map, results). summary: what the
command found, always an object. Strict JSON: NaN and infinities are null (harness/results.py `strict`).
Without --json the command's own text renderer prints the same summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from harness.results import Run, StoredSummary, dumps

SCHEMA = 1


def envelope(run: Run | Path | str | None, summary: Mapping[str, Any] | StoredSummary) -> dict[str, Any]:
    """The top-level JSON document of a command's result."""
    if isinstance(summary, StoredSummary):
        summary = summary.as_dict()
    if not isinstance(summary, Mapping):
        raise TypeError(f"a summary is an object, not {type(summary).__name__}")
    path = run.path if isinstance(run, Run) else run
    return {"schema": SCHEMA, "run": None if path is None else str(path), "summary": dict(summary)}


def emit(run: Run | Path | str | None, summary: Any, as_json: bool,
         render: Callable[[Any], None] | None = None) -> None:
    """Print a command's result: the envelope as strict JSON with --json, else through its text renderer. A typed
    summary (StoredSummary) goes to JSON through its as_dict and to the renderer as the object itself."""
    if as_json:
        print(dumps(envelope(run, summary), indent=2))
    elif render is not None:
        render(summary)
