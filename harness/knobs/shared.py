"""A machine-wide registry of kvds processes sharing one host setting (a tracefs mount, a sysctl switch).

Every kvds process that relies on such a setting joins it; the first one to join records the value it
found. Leaving returns that original value only to the last live user, who puts it back. The registry lives
in /run (gone at reboot, like the settings themselves) and is independent of KVDS_STATE_DIR, so runs with
private state directories (tests, remote lab hosts on one machine) still see each other.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import psutil

ORIGINAL = ".original"


def registry_dir() -> Path:
    return Path(os.environ.get("KVDS_SHARED_DIR", "/run/kvds/shared"))


def _dir(key: str) -> Path:
    return registry_dir() / (key.strip("/").replace("/", "_") or "root")


def _token() -> str:
    pid = os.getpid()
    return f"{pid}-{int(psutil.Process(pid).create_time() * 1000)}-{secrets.token_hex(4)}"


def _alive(token: str) -> bool:
    try:
        pid, start = token.split("-")[:2]
        p = psutil.Process(int(pid))
        return p.status() != psutil.STATUS_ZOMBIE and int(p.create_time() * 1000) == int(start)
    except (ValueError, psutil.Error):
        return False


def join(key: str, current: str) -> str:
    """Register this process as a user of `key`; `current` becomes the original if nobody holds it yet."""
    d = _dir(key)
    d.mkdir(parents=True, exist_ok=True)
    live = [t for t in d.iterdir() if t.name != ORIGINAL and _alive(t.name)]
    if not live:
        for t in d.iterdir():  # users that died without restoring: their original still stands
            if t.name != ORIGINAL:
                t.unlink(missing_ok=True)
    try:
        fd = os.open(d / ORIGINAL, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(current)
    except FileExistsError:
        pass
    token = _token()
    (d / token).touch()
    return token


def leave(key: str, token: str) -> str | None:
    """Drop one registration; returns the original value when no live user remains (the caller restores it)."""
    d = _dir(key)
    if not d.is_dir():
        return None
    (d / token).unlink(missing_ok=True)
    if any(t.name != ORIGINAL and _alive(t.name) for t in d.iterdir()):
        return None
    orig = d / ORIGINAL
    value = orig.read_text() if orig.exists() else None
    for t in d.iterdir():
        t.unlink(missing_ok=True)
    d.rmdir()
    return value
