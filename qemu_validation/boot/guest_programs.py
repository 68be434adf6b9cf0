"""Guest benchmark programs (guest/*.c): compiled static once per source content, cached beside the kernels.

A static binary needs nothing from the guest's initramfs but the kernel; the cache key is the source's hash,
so an edited program is rebuilt and an unchanged one never is."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from qemu_validation.kernel import build, cachedirs

CFLAGS = ("-static", "-O2", "-Wall", "-Wextra", "-Werror")


def static_binary(source: Path) -> Path:
    """The compiled program of `source` (guest/NAME.c -> .../NAME), compiling it on first use."""
    key = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = cachedirs.guest_bin() / key / source.stem
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(["gcc", *CFLAGS, "-o", str(out), str(source)], capture_output=True, text=True)
        if p.returncode != 0:
            raise build.BuildError(f"compiling {source.name} failed:\n{p.stderr.strip()[-1500:]}")
    return out
