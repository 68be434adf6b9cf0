"""The debug guest kernel, built in the background while the host tests run.

Why: on a machine that has never built it, the cold build (`kvds qemu build --kasan`, about 11 minutes on 2 cores)
would otherwise stand in front of the first guest test. The host tests leave much of the CPU idle (they wait on
devices, timed phases and subprocesses), so the build runs beside them at a low priority, the guest tests run last,
and the first of them waits for what is left of the build. Where the kernel is cached nothing starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import pytest

NICE = 10   # below the tests: the build takes what they leave idle


def guests_last(items: list[pytest.Item]) -> None:
    """Host tests first, guest tests after them, each group in collection order (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("guest") is not None)


class BackgroundBuild:
    """One `kvds qemu build --kasan` in its own process group, its output in a log file."""

    def __init__(self, argv: Sequence[str], log: Path) -> None:
        self.log = log
        self.started = time.monotonic()
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=lambda: os.nice(NICE),
                                         env=dict(os.environ, KVDS_RESULTS_DIR=str(log.parent / "results")))

    @classmethod
    def start(cls, kvds: Sequence[str]) -> "BackgroundBuild":
        log = Path(tempfile.mkdtemp(prefix="kvds-test-kernel-build-")) / "build.log"
        return cls([*kvds, "qemu", "build", "--kasan"], log)

    def wait(self, say: Callable[[str], None]) -> None:
        """Until the build process ends; a failed build is not an error here: the caller builds in the foreground
        next, which fails with the build's own message."""
        if self.proc.poll() is None:
            say(f"kvds: waiting for the debug guest kernel building in the background since "
                f"{time.monotonic() - self.started:.0f} s (log: {self.log})")
        status = self.proc.wait()
        say(f"kvds: background kernel build ended with status {status} after "
            f"{time.monotonic() - self.started:.0f} s (log: {self.log})")

    def stop(self) -> None:
        """End the build if the session ends first (tests deselected, Ctrl-C): its tree stays for the next build."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def needed(items: Sequence[pytest.Item], config: pytest.Config) -> bool:
    """Whether this session will boot a guest on a host that can and the debug kernel is not built yet."""
    if os.geteuid() != 0 or config.option.collectonly:
        return False
    if not any(item.get_closest_marker("guest") is not None for item in items):
        return False
    from harness import doctor
    if not doctor.capability("qemu.guest").ok:
        return False
    from qemu_validation.boot import guest_command
    from qemu_validation.kernel import build
    return build.cached(guest_command.DEFAULT_SPEC) is None


__all__ = ["BackgroundBuild", "guests_last", "needed"]
