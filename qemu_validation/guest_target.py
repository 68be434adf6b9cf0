"""What `--target guest` (harness/remote/guest.py) needs of the lab, registered as the `kvds.guest_lab` entry
point so that the core reaches the lab without importing qemu_validation.

A track names the lab kernel its command needs (`set_defaults(guest_lab=...)` on its parser; the core's
dispatcher passes the name on): `debug`, the default (the mm_intent KASAN + lockdep kernel the memory tracks and
the validator use), `net` (the base kernel + configs/net.config: IPv4, netns, veth, HTB/TBF/netem/fq, for the
delivery track) or `io` (the base kernel + configs/io.config: null_blk device models, bfq, kyber, for the I/O
track). kvds never builds a lab kernel as a side effect of --target guest; `build_command` says how."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import UserError
from qemu_validation.boot.guest_command import DEFAULT_SPEC, KERNEL_FAILURE_STATUS, TIMEOUT_STATUS, boot_and_run
from qemu_validation.kernel import build

__all__ = ["KERNEL_FAILURE_STATUS", "LABS", "TIMEOUT_STATUS", "boot_and_run", "find_kernel", "lab_kernel"]


@dataclass(frozen=True)
class LabKernel:
    spec: build.BuildSpec
    cpus: int  # vCPUs the guest gets
    build_command: str  # what builds it
    build_minutes: int  # a cold build on 2 cores, for the message that asks for one


LABS = {
    "debug": LabKernel(DEFAULT_SPEC, 1, "kvds qemu build --kasan", 8),
    # two vCPUs: the endpoints of a bench (fetcher, server, bulk sender and receiver) run at once
    "net": LabKernel(build.BuildSpec(fragments=(build.NET_FRAGMENT,)), 2,
                     "kvds qemu build --fragment qemu_validation/kernel/configs/net.config", 6),
    # two vCPUs: the reader and the spill writers run at once, as on the host; kernel_patches/io_model gives
    # null_blk the serial transfer time (service_mbps) the device models use
    "io": LabKernel(build.BuildSpec(patches=(*build.DEFAULT_PATCHES, "io_model"), fragments=(build.IO_FRAGMENT,)), 2,
                    "kvds qemu build --patches mm_intent,io_model --fragment qemu_validation/kernel/configs/io.config",
                    6),
}


def lab_kernel(name: str = "debug") -> tuple[LabKernel, build.KernelBuild | None, str]:
    """The lab kernel `name`: its recipe, its build from the cache (None when not built) and its label."""
    try:
        lab = LABS[name]
    except KeyError:
        raise UserError(f"no guest lab kernel {name!r} (known: {', '.join(LABS)})") from None
    return lab, build.cached(lab.spec), build.label_of(lab.spec)


def find_kernel(name: str) -> build.KernelBuild:
    """A build by id, unique id prefix or label, as `kvds qemu run --kernel` takes (UserError when none)."""
    return build.find(name)
