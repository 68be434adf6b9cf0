"""Fill the guest's numba cache on this host before a guest boot, when the sources changed since the last fill.

A guest that finds no compiled functions for this checkout's sources compiles them under TCG: 10+ minutes with no
status line, which looked like a hung run more than once. kvds keys numba's cache on each source file's content
(kv_policy/jit.py), and the guest compiles for numba's `generic` CPU (harness/remote/guest.py GUEST_NUMBA_CPU), so
the same command run here with the guest's numba settings leaves exactly what the guest would have compiled.
Which command compiles what a guest run needs is the command's business: a track's parser declares it
(`guest_warm`, a function of the argv the guest will run; e2e's is its own dry run). This module only runs it,
once per state of the sources, and says so on stderr.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

from harness.paths import cache_dir, repo_root
from harness.progress import say
from harness.remote.guest import GUEST_NUMBA, GUEST_NUMBA_CPU

FILL_TIMEOUT_S = 900.0
STAMPS = ".kvds-filled"
"""cache_dir()/guest-numba/.kvds-filled/<fingerprint>: the sources' state a fill completed for (several checkouts
share the cache, so one stamp per state, not one for the cache)."""
SKIP_DIRS = {"results", "node_modules", "__pycache__"}


def sources_fingerprint(root: Path | None = None) -> str:
    """The state of the Python sources numba's cache depends on: every .py file under the checkout (its path in the
    checkout and its content, as the cache is keyed), the interpreter and numba's version. Not where the checkout
    is: a fresh clone of the same sources finds the fill another clone made."""
    root = root or repo_root()
    h = hashlib.sha256(f"{sys.executable}\0{_numba_version()}\0".encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                p = Path(dirpath) / name
                h.update(f"{p.relative_to(root)}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()[:20]


def _numba_version() -> str:
    try:
        return metadata.version("numba")
    except metadata.PackageNotFoundError:
        return "-"


def guest_numba_env() -> dict[str, str]:
    """This process's environment with the guest's numba settings: its CPU model and the cache the guest is seeded
    from."""
    return {**os.environ, "NUMBA_CPU_NAME": GUEST_NUMBA_CPU, "NUMBA_CACHE_DIR": str(cache_dir() / GUEST_NUMBA),
            "KVDS_NO_PROGRESS": "1"}


def fill(warm_argv: Sequence[str], timeout_s: float = FILL_TIMEOUT_S,
         fingerprint: Callable[[], str] = sources_fingerprint) -> str:
    """Run `kvds warm_argv` here with the guest's numba settings unless a fill already completed for the sources as
    they are; returns what happened, one line (also said on stderr). A fill that fails is said, not raised: the
    guest run still works, compiling under TCG."""
    key = fingerprint()
    stamp = cache_dir() / GUEST_NUMBA / STAMPS / key
    if stamp.exists():
        return f"guest numba cache: up to date for these sources ({key})"
    say(f"guest numba cache: the sources changed, compiling on this host first: kvds {' '.join(warm_argv)}")
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "harness.cli", *warm_argv], env=guest_numba_env(),
                           cwd=repo_root(), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        msg = f"guest numba cache: not filled (the host's compile ran past {timeout_s:.0f} s); the guest compiles"
        say(msg)
        return msg
    secs = time.monotonic() - t0
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        msg = f"guest numba cache: not filled (kvds exited {r.returncode}: {last}); the guest compiles under TCG"
        say(msg)
        return msg
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(" ".join(warm_argv) + "\n")
    msg = f"guest numba cache: filled on this host in {secs:.0f} s ({key})"
    say(msg)
    return msg
