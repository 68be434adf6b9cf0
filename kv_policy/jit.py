"""numba's njit with its on-disk cache in a directory this process can write.

numba caches compiled functions beside their source (__pycache__) unless NUMBA_CACHE_DIR says otherwise, and a
cache it cannot write is an error at import ("no locator available"): a kvds run as another user than the one
who installed it (the CLI's root-check test runs as uid 65534) would fail before printing anything. The cache goes
to kvds's cache directory when writable, else to a per-user directory under the temporary directory. Set before
numba is first imported (numba reads the variable once).

numba names a cache directory after the absolute path of the source's directory, so every fresh clone (CI clones
main anew for each run) compiled every function again: about 50 CPU seconds for the policy simulator alone, per
clone, and a guest numba fill (harness/remote/guest_numba.py) for each. ContentCacheLocator names it after the
source's content instead; numba's own staleness check is already a hash of the content.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from harness.paths import cache_dir


def _writable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK | os.X_OK)


if "NUMBA_CACHE_DIR" not in os.environ:
    for candidate in (cache_dir() / "numba", Path(tempfile.gettempdir()) / f"kvds-numba-{os.getuid()}"):
        if _writable(candidate):
            os.environ["NUMBA_CACHE_DIR"] = str(candidate)
            break

os.environ.setdefault("NUMBA_CACHE_LOCATOR_CLASSES", "kv_policy.jit.ContentCacheLocator,InTreeCacheLocator,"
                                                     "UserWideCacheLocator")

from numba import njit as _njit  # noqa: E402  (after NUMBA_CACHE_DIR is set)
from numba.core.caching import UserProvidedCacheLocator  # noqa: E402


class ContentCacheLocator(UserProvidedCacheLocator):
    """numba's locator for NUMBA_CACHE_DIR, one directory per source content (not per checkout path)."""

    @classmethod
    def get_suitable_cache_subpath(cls, py_file: str) -> str:
        path = Path(py_file)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        return f"{path.parent.name}-{path.stem}-{digest}"


def njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`numba.njit(cache=True)`, cached where this process can write (see the module docstring); compiled
    in memory only when numba still finds no cache it can use (it raises RuntimeError "no locator available")."""
    try:
        return _njit(cache=True)(fn)
    except RuntimeError:
        return _njit(fn)
