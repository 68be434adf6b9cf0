"""What `--target guest` (harness/remote/guest.py) needs of the lab, registered as the `kvds.guest_lab` entry
point so that the core reaches the lab without importing qemu_validation."""

from __future__ import annotations

from qemu_validation import build
from qemu_validation.guest_run import DEFAULT_SPEC, KERNEL_FAILURE_STATUS, TIMEOUT_STATUS, run_guest

__all__ = ["KERNEL_FAILURE_STATUS", "TIMEOUT_STATUS", "default_kernel", "find_kernel", "run_guest"]


def default_kernel() -> tuple[build.KernelBuild | None, str]:
    """The default debug guest kernel from the build cache (None when not built), and its label."""
    return build.cached(DEFAULT_SPEC), build.label_of(DEFAULT_SPEC)


def find_kernel(name: str) -> build.KernelBuild:
    """A build by id, unique id prefix or label, as `kvds qemu run --kernel` takes (UserError when none)."""
    return build.find(name)
