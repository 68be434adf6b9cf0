"""The I/O track's doctor probe (area "io", registered in pyproject.toml's `kvds.probes`): its load generator."""

from __future__ import annotations

import shutil

from harness.capability import Capability, available, unavailable
from io_priority import ioload_launch

AREA = "io"


def probes() -> list[Capability]:
    """io_priority/ioload.c: built once per source hash, needs a C compiler and liburing's header."""
    if ioload_launch.binary_path().exists():
        return [available("io.ioload", f"built at {ioload_launch.binary_path()}", AREA)]
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return [unavailable("io.ioload", "no C compiler (Debian build-essential) to build io_priority/ioload.c", AREA)]
    if not ioload_launch.LIBURING_HEADER.exists():
        return [unavailable("io.ioload", f"no {ioload_launch.LIBURING_HEADER} (Debian liburing-dev) to build ioload.c",
                            AREA)]
    return [available("io.ioload", f"not built yet; {cc} builds it on first use", AREA)]
