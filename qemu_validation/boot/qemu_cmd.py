"""The one place a QEMU command line is built, so every boot (run, validate, guest API, doctor) is the same machine.

isa-debug-exit is how the guest reports its exit status: a guest write of v to port 0xf4 makes QEMU exit with
(v << 1) | 1, so an odd QEMU status carries the guest's status and anything else means it never reported one.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness.environment import ICOUNT_MAX_SHIFT

DEBUG_EXIT_PORT = 0xF4
SHARE_TAG = "kvdsshare"
ROOT_TAG = "kvdsroot"
QEMU_BINARY = "qemu-system-x86_64"
ICOUNT_TSC_KHZ = 1_000_000  # under -icount the guest TSC is QEMU's virtual clock: 1 tick per virtual ns

# Kernel command line shared by every boot: console on the first serial port, no reboot on panic (QEMU then
# exits with status 0, which is never a valid debug-exit status), and the printk level that shows every splat.
# The RCU stall timeout is wall-clock time: a KASAN+lockdep guest under TCG on a busy 2-CPU host can go 21 s (the
# default) without a quiescent state and no kernel bug, so TCG boots allow 300 s before calling it a stall.
# no_timer_check: the IO-APIC timer check counts ticks over a busy-wait; a TCG vCPU starved by a loaded host
# misses them and the kernel panics "IO-APIC + timer doesn't work!" (seen at load average 11) with no bug at all.
BASE_APPEND = ("console=ttyS0", "panic=-1", "loglevel=5", "rdinit=/init")
TCG_APPEND = ("rcupdate.rcu_cpu_stall_timeout=300", "no_timer_check")


@dataclass(frozen=True)
class Machine:
    kernel: Path
    initramfs: Path
    console_log: Path
    accel: str = "tcg"
    memory_mb: int = 1024
    cpus: int = 1
    share_dir: Path | None = None
    host_root: bool = False
    extra_append: tuple[str, ...] = field(default_factory=tuple)
    cpu: str | None = None  # TCG CPU model (None: QEMU's default); e.g. Nehalem for x86-64-v2 user space (numpy)
    tsc_khz: int | None = None  # the host's TSC rate, which a TCG guest's TSC runs at (see tsc_append)
    icount_shift: int | None = None  # TCG only: guest time = instructions x 2**shift ns (see icount_args)
    icount_warp: bool = False  # icount's idle time jumps to the next timer (sleep=off) instead of passing in real time


def qemu_binary() -> str | None:
    return shutil.which(QEMU_BINARY)


def command(m: Machine, binary: str = QEMU_BINARY) -> list[str]:
    """The full argv for booting `m`; pure, so tests check it without starting QEMU.

    TCG keeps QEMU's default CPU model: `-cpu max` would offer LA57, and 5-level paging moves TASK_SIZE_MAX,
    which the validator's range checks assume is the 4-level value.
    """
    if m.accel not in ("tcg", "kvm"):
        raise ValueError(f"unknown accelerator {m.accel!r}")
    if m.icount_shift is not None and (m.accel != "tcg" or not 0 <= m.icount_shift <= ICOUNT_MAX_SHIFT):
        raise ValueError(f"icount shift {m.icount_shift!r} needs TCG and 0..{ICOUNT_MAX_SHIFT}")
    argv = [
        # q35: its ACPI _PRT is a static table; i440fx computes it in an AML loop that KASAN+lockdep under TCG
        # can run past ACPICA's loop timeout, leaving virtio-pci without an interrupt.
        binary, "-machine", "q35", "-accel", m.accel,
        *(["-cpu", "host"] if m.accel == "kvm" else (["-cpu", m.cpu] if m.cpu else [])),
        "-m", f"{m.memory_mb}M", "-smp", str(m.cpus),
        "-nodefaults", "-no-user-config", "-no-reboot",
        "-display", "none", "-monitor", "none",
        "-serial", f"file:{m.console_log}",
        "-device", f"isa-debug-exit,iobase={DEBUG_EXIT_PORT:#x},iosize=0x04",
        *icount_args(m),
        "-kernel", str(m.kernel), "-initrd", str(m.initramfs),
        "-append", " ".join((*BASE_APPEND, *(TCG_APPEND if m.accel == "tcg" else ()), *tsc_append(m),
                             *m.extra_append)),
    ]
    if m.share_dir is not None:
        argv += ["-virtfs",
                 f"local,path={_escape(m.share_dir)},mount_tag={SHARE_TAG},security_model=none,id={SHARE_TAG}"]
    if m.host_root:
        argv += ["-virtfs", f"local,path=/,mount_tag={ROOT_TAG},security_model=none,readonly=on,id={ROOT_TAG}"]
    return argv


def tsc_append(m: Machine) -> tuple[str, ...]:
    """Under TCG the guest's TSC is the host's, so tell the guest its rate instead of letting it calibrate: a
    vCPU descheduled during calibration on a loaded host measured 837 MHz for a 2,596 MHz TSC and its clock ran
    3.1 times fast (every in-guest timing, and the phase breakdown, with it). The kernel's later refinement only
    accepts values within 1% of this one. Under icount the TSC is QEMU's virtual clock instead, one tick per
    virtual nanosecond whatever the shift: 1 GHz."""
    if m.accel != "tcg":
        return ()
    if m.icount_shift is not None:
        return (f"tsc_early_khz={ICOUNT_TSC_KHZ}",)
    return (f"tsc_early_khz={m.tsc_khz}",) if m.tsc_khz else ()


def icount_args(m: Machine) -> tuple[str, ...]:
    """Instruction-count time (`-icount`): the guest's clocks advance by the instructions it executes, 2**shift
    ns each, never by host time. A vCPU the host deschedules for 5 ms then loses no guest time, so a guest
    latency is the work done on its path (a resident read, a swap-in fault) and no host stall shows in it: the
    clock for comparing two variants' tails on a shared TCG host. Real-time waits (idle, 9p) still pass at
    real speed (sleep=on), and align=off lets the guest run as fast as TCG can. With icount_warp (sleep=off) idle time
jumps to the next timer deadline too: a guest waiting on its own timers (a model device's completions, a reader's
due times) sees no real time at all, so a host that runs QEMU late is in none of its latencies."""
    if m.icount_shift is None:
        return ()
    return ("-icount", f"shift={m.icount_shift},align=off,sleep={'off' if m.icount_warp else 'on'}")


def host_tsc_khz(cpuinfo: str) -> int | None:
    """The host's TSC rate from /proc/cpuinfo when the TSC ticks at a fixed rate (constant_tsc, nonstop_tsc and
    a known frequency); None otherwise, and then the guest calibrates as before."""
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo.splitlines() if l.startswith("flags")), [])
    mhz = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("cpu MHz")), "")
    if not {"constant_tsc", "nonstop_tsc", "tsc_known_freq"} <= set(flags):
        return None
    try:
        return round(float(mhz) * 1000) or None
    except ValueError:
        return None


def _escape(path: Path) -> str:
    """QEMU option values escape a comma by doubling it."""
    return str(path).replace(",", ",,")


def decode_exit(qemu_status: int) -> int | None:
    """The guest's status from QEMU's exit status, or None when the guest never wrote to the debug-exit port."""
    if qemu_status > 0 and qemu_status & 1:
        return qemu_status >> 1
    return None


def port_value(status: int) -> int:
    """What the guest writes to the port for `status`: only 7 bits survive, so 128-255 report as 127."""
    return status if 0 <= status < 128 else 127
