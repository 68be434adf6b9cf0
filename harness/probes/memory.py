"""Memory mechanisms: madvise advice, swap backends, zswap, memory cgroups, DAMON, MGLRU."""

from __future__ import annotations

import errno
import mmap
import os
import shutil
from pathlib import Path

from harness.capability import Capability, available, unavailable
from harness.errors import Unavailable
from harness.kconfig import config_state
from harness.knobs.guards import DAMON_ADMIN, foreign_kdamonds
from harness.mapping import MADVISE_ADVICE

AREA = "memory"


def _madvise(name: str, advice: int) -> Capability:
    """Try one advice on a private anonymous scratch mapping (the kind the KV arena uses)."""
    size = 4 * mmap.PAGESIZE
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.write(b"\x01" * size)
        m.madvise(advice)
        return available(f"madvise.{name}", f"advice {advice} accepted on private anonymous memory", AREA)
    except OSError as exc:
        why = "kernel does not know this advice" if exc.errno == errno.EINVAL else exc.strerror
        return unavailable(f"madvise.{name}", f"madvise({advice}) failed: {why}", AREA)
    finally:
        m.close()


def _swap() -> list[Capability]:
    out = []
    root = os.geteuid() == 0
    if not Path("/proc/swaps").exists():
        return [unavailable(n, "CONFIG_SWAP is off (/proc/swaps missing)", AREA) for n in ("swap.zram", "swap.swapfile", "zswap")]
    if Path("/sys/class/zram-control/hot_add").exists():
        out.append(available("swap.zram", "zram hot_add present: kvds creates its own device", AREA) if root
                   else Capability("swap.zram", "needs-root", "zram set-up needs root", AREA))
    else:
        out.append(unavailable("swap.zram", "no /sys/class/zram-control (CONFIG_ZRAM off)", AREA))
    if shutil.which("swapon") and shutil.which("mkswap"):
        out.append(available("swap.swapfile", "swapon/mkswap present, CONFIG_SWAP on", AREA) if root
                   else Capability("swap.swapfile", "needs-root", "swapon needs root", AREA))
    else:
        out.append(unavailable("swap.swapfile", "swapon/mkswap missing (util-linux)", AREA))
    zs = Path("/sys/module/zswap/parameters")
    if zs.is_dir():
        comp = (zs / "compressor").read_text().strip()
        enabled = (zs / "enabled").read_text().strip()
        out.append(available("zswap", f"zswap present (enabled={enabled}, compressor={comp})", AREA))
    else:
        out.append(unavailable("zswap", "no /sys/module/zswap (CONFIG_ZSWAP off)", AREA))
    return out


def _memcg() -> list[Capability]:
    from harness.knobs.cgroups import hierarchy_for

    out = []
    try:
        version, root = hierarchy_for("memory")
        out.append(available("memcg", f"memory controller on cgroup v{version} at {root}", AREA))
        out.append(available("memcg.v1", f"memory controller on cgroup v1 at {root}", AREA) if version == 1
                   else unavailable("memcg.v1", f"memory controller is on cgroup v2 at {root}", AREA))
        out.append(available("memcg.v2", f"memory controller on cgroup v2 at {root}", AREA) if version == 2
                   else unavailable("memcg.v2", "memory controller is on v1 only: no memory.min/zswap.max/reclaim", AREA))
    except Unavailable as exc:
        out += [unavailable(n, str(exc), AREA) for n in ("memcg", "memcg.v1", "memcg.v2")]
    return out


def _damon() -> list[Capability]:
    out = []
    if not DAMON_ADMIN.is_dir():
        reason = "no /sys/kernel/mm/damon/admin (CONFIG_DAMON_SYSFS off)"
        return [unavailable(n, reason, AREA) for n in ("damon.sysfs", "damon.vaddr", "damon.paddr", "damon.free")]
    out.append(available("damon.sysfs", "DAMON sysfs interface present", AREA))
    for ops in ("vaddr", "paddr"):
        state = config_state(f"DAMON_{ops.upper()}")
        if state in ("y", "m"):
            out.append(available(f"damon.{ops}", f"CONFIG_DAMON_{ops.upper()}={state}", AREA))
        elif state == "unknown":
            out.append(available(f"damon.{ops}", "kernel config unpublished; assumed present with DAMON sysfs", AREA))
        else:
            out.append(unavailable(f"damon.{ops}", f"CONFIG_DAMON_{ops.upper()} is off", AREA))
    foreign = foreign_kdamonds(set())
    if foreign:
        out.append(unavailable("damon.free", f"kdamond {foreign[0]} is running under another owner; kvds leaves it alone "
                               "(DAMON experiments run in the guest lab)", AREA))
    else:
        out.append(available("damon.free", "no kdamond is running: kvds may start its own", AREA))
    return out


def _mglru() -> Capability:
    f = Path("/sys/kernel/mm/lru_gen/enabled")
    if f.exists():
        return available("mglru", f"/sys/kernel/mm/lru_gen/enabled = {f.read_text().strip()}", AREA)
    return unavailable("mglru", "no /sys/kernel/mm/lru_gen (CONFIG_LRU_GEN off)", AREA)


def _pagemap() -> Capability:
    """Per-page residency (/proc/<pid>/pagemap): the VM bench counts swapped-out pages per class with it."""
    f = Path("/proc/self/pagemap")
    if not f.exists():
        return unavailable("pagemap", "no /proc/<pid>/pagemap (CONFIG_PROC_PAGE_MONITOR off)", AREA)
    m = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m[0] = 1
        import ctypes

        anchor = ctypes.c_char.from_buffer(m)
        addr = ctypes.addressof(anchor)
        del anchor
        with open(f, "rb") as fh:
            fh.seek(addr // mmap.PAGESIZE * 8)
            entry = int.from_bytes(fh.read(8), "little")
    except OSError as exc:
        return unavailable("pagemap", f"reading /proc/self/pagemap failed: {exc.strerror}", AREA)
    finally:
        m.close()
    if not entry >> 63:
        return unavailable("pagemap", "pagemap does not report a touched page as present", AREA)
    return available("pagemap", "pagemap reports present/swapped per page", AREA)


def _psi() -> Capability:
    f = Path("/proc/pressure/memory")
    try:
        f.read_text()
        return available("psi.memory", "/proc/pressure/memory readable", AREA)
    except OSError as exc:
        why = "CONFIG_PSI off" if not f.exists() else (exc.strerror or str(exc))
        return unavailable("psi.memory", f"no memory PSI ({why}; psi=0 on the command line also disables it)", AREA)


def _mm_intent() -> Capability:
    """The experimental mm_intent registry (kernel_patches/mm_intent): its debugfs files, or why they are absent.

    debugfs may simply not be mounted (kvds mounts it through the journal when it registers), so an unmounted
    debugfs is answered from the kernel config, never by mounting here."""
    from harness.knobs.mounts import DEBUGFS, is_mounted

    reg = Path(DEBUGFS) / "mm_intent" / "register"
    state = config_state("MM_INTENT")
    if is_mounted(DEBUGFS, "debugfs"):
        if os.geteuid() != 0:
            return Capability("mm_intent", "needs-root", "debugfs (and /sys/kernel/debug/mm_intent) is root-only", AREA)
        if reg.exists():
            return available("mm_intent", f"{reg} present (CONFIG_MM_INTENT)", AREA)
        return unavailable("mm_intent", f"no {reg.parent}: kernel {os.uname().release} does not carry the mm_intent "
                           "series (it runs in the QEMU guest lab's kernels)", AREA)
    if state in ("y", "m"):
        return available("mm_intent", f"CONFIG_MM_INTENT={state}; debugfs is not mounted yet (kvds mounts it)", AREA)
    if state == "n":
        return unavailable("mm_intent", f"CONFIG_MM_INTENT is off in kernel {os.uname().release} (no "
                           f"{reg.parent}; the mm_intent series runs in the QEMU guest lab's kernels)", AREA)
    return unavailable("mm_intent", f"debugfs is not mounted and kernel {os.uname().release} publishes no config: "
                       f"cannot tell whether {reg.parent} exists", AREA)


def probes() -> list[Capability]:
    out = [_madvise(name, adv) for name, adv in MADVISE_ADVICE.items()]
    out += _swap() + _memcg() + _damon() + [_mglru(), _pagemap(), _psi(), _mm_intent()]
    return out
