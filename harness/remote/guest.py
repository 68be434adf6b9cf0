"""The `guest` target: the same kvds command inside the QEMU guest kernel (the qemu_validation lab).

The guest chroots into this machine's root (read-only over 9p) and runs this checkout's kvds from the venv; a
fresh share directory (read-write) holds the guest kvds's journals, scratch files, results and output, so
its run directories come home exactly as an ssh host's do. When the host cannot run QEMU or the lab's kernel has
not been built, the target says so (kvds never builds a kernel as a side effect of --target guest). The lab
itself (qemu_validation/guest_target.py) is reached through the `kvds.guest_lab` entry point (harness/tracks.py).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness import deferred_figures, progress, tracks
from harness.environment import icount_shift
from harness.errors import Unavailable, UserError
from harness.paths import cache_dir, work_dir

GUEST_TIMEOUT_S = 1800.0
"""The guest run's timeout unless the command's plan needs more (guest_timeout) or --guest-timeout says."""
STATUS_POLL_S = 5.0  # how often the guest's stderr is read for status lines to relay
FOLLOW_JOIN_S = 10.0  # how long the end of a run waits for the status relay's last read
GUEST_MEMORY_MB = 2048
CONSOLE_TAIL_LINES = 30
GUEST_KERNEL_ENV = "KVDS_GUEST_KERNEL"
"""A build id, unique id prefix or label (as `kvds qemu run --kernel` takes) to boot instead of the default debug
kernel: a kernel under test, e.g. with a new patch of the series, while the series' files are being edited."""
GUEST_CLOCK_ENV = "KVDS_GUEST_CLOCK"
"""`wall` (default), `icount[:SHIFT]` or `icount-warp[:SHIFT]` (idle time jumps to the next timer as well): boot the
guest with QEMU's instruction-count time (qemu_cmd.icount_args),
so its latencies are the work on their path and a host stall of the vCPU is not in them. The guest records it
in every run's environment (`clock`, from the `kvds.clock=` word on its kernel command line)."""
GUEST_CPU = "Nehalem"
"""x86-64-v2 (SSE4.2, POPCNT): the venv's numpy needs it, QEMU's default TCG model (qemu64) lacks it (SIGILL);
no LA57, so the guest keeps 4-level paging."""
GUEST_STATE_DIR = "/tmp/kvds-state"
GUEST_HOSTNAME = "guest"
GUEST_SETUP = ("grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup; "
               "echo +memory > /sys/fs/cgroup/cgroup.subtree_control; "
               f"echo {GUEST_HOSTNAME} > /proc/sys/kernel/hostname; ")
"""The guest's /init mounts no cgroup hierarchy; the throwaway guest gets cgroup2 with the memory controller
(guest state dies with the guest, so it is not journaled) for commands that create memory cgroups. It also gets a
host name: the kernel's default, "(none)", would put parentheses into its run ids (results/<date>-<kind>-<host>-...)."""


@dataclass
class GuestResult:
    exit_status: int
    stdout: str
    stderr: str
    run_dirs: list[Path] = field(default_factory=list)
    share: Path | None = None  # the caller removes it once the run directories are filed

    def cleanup(self) -> None:
        if self.share is not None:
            shutil.rmtree(self.share, ignore_errors=True)


DEFAULT_LAB = "debug"


def guest_lab_status(lab_name: str = DEFAULT_LAB) -> tuple[bool, str]:
    """(ready, reason): whether `--target guest` can run here with lab kernel `lab_name`
    (qemu_validation/guest_target.py: the kernel the command's track asked for), and why not.

    Only a real absence on this host is "not ready" (no QEMU, no built guest kernel). The lab's modules are
    part of kvds (installed with it), so failing to import them is a kvds error and raises, as does a QEMU
    probe in status "error": neither may pass for a host that lacks the lab."""
    from harness import doctor

    lab = tracks.guest_lab()
    tcg, kvm = doctor.capability("qemu.tcg", "qemu"), doctor.capability("qemu.kvm", "qemu")
    for c in (tcg, kvm):
        if c.is_error:
            raise doctor.ProbeError(f"{c.name}: {c.reason}")
    if not (tcg.ok or kvm.ok):
        return False, f"the QEMU guest lab cannot run on this host: {tcg.reason}"
    chosen = os.environ.get(GUEST_KERNEL_ENV, "").strip()
    if chosen:
        kb = lab.find_kernel(chosen)  # UserError when there is no such build
        return True, f"guest kernel {kb.id[:12]} ({kb.label}, {GUEST_KERNEL_ENV}) is built"
    want, kb, label = lab.lab_kernel(lab_name)
    if kb is None:
        return False, (f"the QEMU guest lab is not built on this host: its {lab_name} kernel ({label}) is not in "
                       f"the build cache; build it with `{want.build_command}` first (about {want.build_minutes} "
                       "min)")
    return True, f"guest kernel {kb.id[:12]} ({kb.label}) is built"


def guest_clock(text: str | None = None) -> int | None:
    """The icount shift `KVDS_GUEST_CLOCK` asks for (None: wall-clock time); UserError on anything else."""
    return _clock(text)[0]


def guest_clock_warps(text: str | None = None) -> bool:
    """`icount-warp[:SHIFT]`: idle guest time jumps to the next timer (QEMU's sleep=off) instead of passing in real
    time, so a guest that waits on its own timers sees none of the host's delays (qemu_cmd.icount_args)."""
    return _clock(text)[1]


def _clock(text: str | None) -> tuple[int | None, bool]:
    text = (os.environ.get(GUEST_CLOCK_ENV, "") if text is None else text).strip()
    if text in ("", "wall"):
        return None, False
    kind, colon, shift = text.partition(":")
    if kind in ("icount", "icount-warp"):
        try:
            return (icount_shift(shift) if colon else 0), kind == "icount-warp"
        except ValueError as exc:
            raise UserError(f"{GUEST_CLOCK_ENV}={text!r}: {exc}") from None
    raise UserError(f"{GUEST_CLOCK_ENV}={text!r}: expected wall, icount[:SHIFT] or icount-warp[:SHIFT]")


def _seed_matplotlib_cache(dest: Path) -> None:
    """Give the guest this host's matplotlib font list: the guest's home is read-only, and rebuilding the font
    cache there (every font over 9p under TCG) took longer than the measurement itself."""
    try:
        import matplotlib

        for f in Path(matplotlib.get_cachedir()).glob("fontlist-*.json"):
            shutil.copy2(f, dest / f.name)
    except OSError:  # an optimisation only: a font list that cannot be copied, the guest builds its own
        pass


def console_tail(res: Any, n_lines: int = CONSOLE_TAIL_LINES) -> str:
    """What a failed guest leaves for its stderr: the first kernel finding's report and the console's last lines
    (the guest's own log; the whole console stays at its path)."""
    out = ""
    if res.findings:
        out += f"\nkvds: guest: {res.findings[0].kind} report:\n{res.findings[0].context}\n"
    try:
        with Path(res.console_log).open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * n_lines * 2))
            tail = f.read().decode(errors="replace").splitlines()[-n_lines:]
    except OSError:
        return out
    return out + f"kvds: guest: console tail ({res.console_log}):\n" + "\n".join(tail) + "\n"


GUEST_NUMBA = "guest-numba"
"""cache_dir()/guest-numba: numba's compiled kvds functions for the guest, kept between guest runs (compiling them
under TCG + KASAN took longer than the measurement). The guest compiles for numba's `generic` CPU
(GUEST_NUMBA_CPU: no host-specific features in the cache key), so this host fills the cache before a guest boot
(harness/remote/guest_numba.py, with the command's declared warm-up)."""
GUEST_NUMBA_CPU = "generic"


def _numba_cache(src: Path, dest: Path) -> None:
    """Copy numba's cache files from src into dest (those dest lacks or holds older): seeded into the share before
    the boot, copied back after it. An optimisation only: a cache that cannot be copied is compiled again."""
    try:
        for f in src.rglob("*"):
            out = dest / f.relative_to(src)
            if f.is_dir():
                out.mkdir(parents=True, exist_ok=True)
            elif not out.exists() or f.stat().st_mtime > out.stat().st_mtime:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, out)
    except OSError:
        pass


def guest_timeout(args: Any) -> float:
    """The seconds a `--target guest` run of this command may take: `--guest-timeout` when given, else what the
    command's own plan needs (a track's parser sets `guest_seconds`, a function of the parsed arguments: e2e's
    steps x repetitions x cells) when that is more than GUEST_TIMEOUT_S, else GUEST_TIMEOUT_S."""
    given = getattr(args, "guest_timeout", None)
    if given:
        return float(given)
    plan = getattr(args, "guest_seconds", None)
    return max(GUEST_TIMEOUT_S, float(plan(args))) if callable(plan) else GUEST_TIMEOUT_S


def follow(path: Path, on_line: Callable[[str], None], stop: threading.Event, poll_s: float = STATUS_POLL_S) -> None:
    """Hand each whole line the guest appends to path (its kvds's stderr, in the share) to on_line until stop is
    set, and once more after it: the guest command's status lines (progress.say) while it runs, where the host's
    progress line shows them, the last ones included."""
    pos = 0
    while True:
        last = stop.wait(poll_s)
        pos = _relay(path, pos, on_line)
        if last:
            return


def _relay(path: Path, pos: int, on_line: Callable[[str], None]) -> int:
    """The whole lines of path from pos on, to on_line; the position after the last of them."""
    try:
        with path.open("rb") as f:
            f.seek(pos)
            chunk = f.read()
    except OSError:  # not created yet
        return pos
    end = chunk.rfind(b"\n")
    if end < 0:
        return pos
    for line in chunk[:end].decode(errors="replace").splitlines():
        if line.strip():
            on_line(line.strip())
    return pos + end + 1


def guest_runner(lab_name: str = DEFAULT_LAB, timeout_s: float = GUEST_TIMEOUT_S) -> Callable[..., GuestResult]:
    """A function running `kvds argv` in the guest on lab kernel `lab_name` (KVDS_GUEST_KERNEL overrides it) for at
    most `timeout_s` (guest_timeout), handing the guest command's status lines to `on_line` while it runs; raises
    Unavailable (with the reason) when it cannot."""
    shift, warp = guest_clock(), guest_clock_warps()  # bad input is refused before anything boots
    ready, why = guest_lab_status(lab_name)
    if not ready:
        raise Unavailable(why)
    lab = tracks.guest_lab()
    want, kb, _ = lab.lab_kernel(lab_name)
    kernel = os.environ.get(GUEST_KERNEL_ENV, "").strip() or (kb.id if kb is not None else None)

    def run(argv: list[str], on_line: Callable[[str], None] | None = None) -> GuestResult:
        share = work_dir() / "remote-guest" / secrets.token_hex(4)
        for sub in ("results", "work", "cache", "matplotlib"):
            (share / sub).mkdir(parents=True, exist_ok=True)
        _seed_matplotlib_cache(share / "matplotlib")
        _numba_cache(cache_dir() / GUEST_NUMBA, share / "cache" / "numba")
        q = shlex.quote
        env = " ".join(f"{k}={q(str(share / v))}" for k, v in (("KVDS_RESULTS_DIR", "results"),
                                                              ("KVDS_WORK_DIR", "work"), ("KVDS_CACHE_DIR", "cache")))
        # the journal lives in the guest's own tmpfs: what it records dies with the guest anyway, and each
        # record's sync over 9p (cache=none) under TCG made a DAMON set-up take minutes
        env += f" KVDS_STATE_DIR={GUEST_STATE_DIR} MPLCONFIGDIR={q(str(share / 'matplotlib'))}"
        env += f" NUMBA_CPU_NAME={GUEST_NUMBA_CPU}"
        # figures are drawn by the host when it files the runs (harness/deferred_figures.py): minutes under TCG + KASAN
        env += f" {deferred_figures.DEFER_ENV}=1 {progress.STATUS_LINES_ENV}=1"
        cmd = (GUEST_SETUP + f"exec env {env} KVDS_NO_PROGRESS=1 {q(sys.executable)} -m harness.cli "
               + " ".join(q(a) for a in argv) + f" > {q(str(share / 'stdout'))} 2> {q(str(share / 'stderr'))}")
        stop = threading.Event()
        relay = threading.Thread(target=follow, args=(share / "stderr", on_line, stop), daemon=True) \
            if on_line is not None else None
        if relay is not None:
            relay.start()
        try:
            res = lab.boot_and_run(kernel, ["sh", "-c", cmd], share, host_root=True, timeout=timeout_s,
                                memory_mb=GUEST_MEMORY_MB, cpus=want.cpus, cpu=GUEST_CPU, icount_shift=shift,
                                icount_warp=warp)
            status = res.status if res.status is not None and not res.findings and not res.timed_out else (
                lab.TIMEOUT_STATUS if res.timed_out else lab.KERNEL_FAILURE_STATUS)
            stdout = (share / "stdout").read_text(errors="replace") if (share / "stdout").exists() else ""
            stderr = (share / "stderr").read_text(errors="replace") if (share / "stderr").exists() else ""
            if res.failure:
                stderr += console_tail(res) + f"\nkvds: guest: {res.failure}\n"
            _numba_cache(share / "cache" / "numba", cache_dir() / GUEST_NUMBA)
        except BaseException:
            stop.set()
            shutil.rmtree(share, ignore_errors=True)
            raise
        stop.set()
        if relay is not None:  # its last read relays the guest's final status lines
            relay.join(FOLLOW_JOIN_S)
        runs = sorted(p for p in (share / "results").iterdir() if p.is_dir())
        return GuestResult(status, stdout, stderr, runs, share)

    return run
