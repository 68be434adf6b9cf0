"""The I/O track's doctor probes (area "io", registered in pyproject.toml's `kvds.probes`): its load generator, and
the guest lab with a model device (`kvds run`'s io-model stage runs only where it is ready)."""

from __future__ import annotations

import shutil

from harness.capability import Capability, available, unavailable
from io_priority import ioload_launch

AREA = "io"


def probes() -> list[Capability]:
    return [_ioload(), _model_lab()]


def _model_lab() -> Capability:
    """`--target guest --device-model`: QEMU runs here and the io lab kernel (null_blk) is in the build cache."""
    from harness import tracks
    from harness.errors import UserError
    from harness.remote.guest import guest_lab_status

    lab = tracks.guest_lab()
    want, label = lab.LABS["io"], lab.build.label_of(lab.LABS["io"].spec)
    try:  # by label first, reading only the build cache: the exact check hashes the kernel source, which inside a
        lab.find_kernel(label)  # guest (an empty cache) would import the source tree under emulation for minutes
    except UserError:
        return unavailable("io.model-lab", f"the io lab kernel ({label}) is not built; build it with "
                           f"`{want.build_command}`", AREA)
    ready, why = guest_lab_status("io")
    return (available if ready else unavailable)("io.model-lab", why, AREA)


def _ioload() -> Capability:
    """io_priority/ioload.c: built once per source hash, needs a C compiler and liburing's header."""
    if ioload_launch.binary_path().exists():
        return available("io.ioload", f"built at {ioload_launch.binary_path()}", AREA)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return unavailable("io.ioload", "no C compiler (Debian build-essential) to build io_priority/ioload.c", AREA)
    if not ioload_launch.LIBURING_HEADER.exists():
        return unavailable("io.ioload", f"no {ioload_launch.LIBURING_HEADER} (Debian liburing-dev) to build ioload.c",
                           AREA)
    return available("io.ioload", f"not built yet; {cc} builds it on first use", AREA)
