"""Where kvds keeps state outside the checkout: journals, caches and results."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Journals live here so `kvds restore` finds them after a crash, whichever checkout ran."""
    return Path(os.environ.get("KVDS_STATE_DIR", "/var/lib/kvds"))


def journal_dir() -> Path:
    return state_dir() / "journal"


def cache_dir() -> Path:
    """Build caches (kernels, headers) survive fresh clones of the repository."""
    env = os.environ.get("KVDS_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "kvds" if xdg else Path.home() / ".cache" / "kvds"


def work_dir() -> Path:
    """Scratch files kvds creates for experiments (loop backing files, swapfiles)."""
    return Path(os.environ.get("KVDS_WORK_DIR", "/var/tmp/kvds"))


def results_dir() -> Path:
    return Path(os.environ.get("KVDS_RESULTS_DIR", "results"))


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
