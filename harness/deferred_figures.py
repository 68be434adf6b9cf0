"""Figures drawn where the results land, not where they were measured.

In the guest lab (TCG + KASAN, the host's venv over 9p) importing NumPy alone takes about 36 s and matplotlib
minutes, so a run made there records the figures it owes (`figures-owed.json`: file name -> "module:function"
taking (summary, path)) and the host draws them when it files the run. Everywhere else figures are drawn at once.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from harness.results import Run

DEFER_ENV = "KVDS_DEFER_FIGURES"
OWED = "figures-owed"


def draw(run: Run, name: str, renderer: str, summary: dict[str, Any]) -> str:
    """Draw figure `name` with `renderer` ("module:function"), or record it as owed; returns what happened."""
    if os.environ.get(DEFER_ENV) == "1":
        owed = run.read_json(OWED) if (run.path / f"{OWED}.json").exists() else {}
        owed[name] = renderer
        run.write_json(OWED, owed)
        return "deferred"
    _renderer(renderer)(summary, run.path / name)
    return "drawn"


def draw_owed(run: Run) -> dict[str, str]:
    """Draw every figure a filed run owes; per figure "drawn" or the error (the run itself is never at risk)."""
    if not (run.path / f"{OWED}.json").exists():
        return {}
    owed: dict[str, str] = run.read_json(OWED)
    done: dict[str, str] = {}
    for name, renderer in owed.items():
        try:
            _renderer(renderer)(run.summary, run.path / name)
            done[name] = "drawn"
        except Exception as exc:  # a figure that cannot be drawn leaves the run filed and says why
            done[name] = f"{type(exc).__name__}: {exc}"
    left = {n: r for n, r in owed.items() if done[n] != "drawn"}
    if left:
        run.write_json(OWED, left)
    else:
        (run.path / f"{OWED}.json").unlink()
    return done


def _renderer(spec: str):
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)
