"""The running kernel's build configuration (/proc/config.gz or /boot/config-<release>)."""

from __future__ import annotations

import gzip
import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def kernel_config() -> dict[str, str] | None:
    """CONFIG_* -> value ("y", "m", a string); None when the host does not publish its config."""
    text = None
    try:
        text = gzip.decompress(Path("/proc/config.gz").read_bytes()).decode()
    except OSError:
        boot = Path(f"/boot/config-{os.uname().release}")
        if boot.exists():
            text = boot.read_text()
    if text is None:
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v.strip('"')
    return out


def config_state(option: str) -> str:
    """'y', 'm', 'n' (set off) or 'unknown' (no config published)."""
    cfg = kernel_config()
    if cfg is None:
        return "unknown"
    return cfg.get(option if option.startswith("CONFIG_") else f"CONFIG_{option}", "n")
