"""Build and launch `ioload` (ioload.c), the C load generator: no interpreter work per I/O.

The binary is compiled once per source revision into the kvds cache (`harness.paths.cache_dir()`), keyed by
the source's hash, so an edit rebuilds it and fresh checkouts share it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.errors import Unavailable
from harness.knobs import workers
from harness.paths import cache_dir

SOURCE = Path(__file__).with_name("ioload.c")
# ioload links the C liburing (Debian liburing-dev, in harness/setup/debian-packages.txt)
LIBURING_HEADER = Path("/usr/include/liburing.h")


def binary_path() -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return cache_dir() / "io_priority" / f"ioload-{digest}"


def _user_cache_binary() -> Path:
    """The same binary in the user's own cache: what a guest lab run finds (its KVDS_CACHE_DIR is a fresh share,
    the host's root is mounted read-only), so the guest does not compile ioload.c again under emulation."""
    return Path.home() / ".cache" / "kvds" / "io_priority" / binary_path().name


def build() -> Path:
    """The compiled helper (compiled now when missing); Unavailable without a C compiler."""
    exe = binary_path()
    if exe.exists():
        return exe
    if _user_cache_binary().exists():
        return _user_cache_binary()
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise Unavailable("no C compiler (Debian build-essential) to build io_priority/ioload.c")
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_suffix(f".tmp{os.getpid()}")
    res = subprocess.run([cc, "-O2", "-Wall", "-o", str(tmp), str(SOURCE), "-lpthread", "-luring"], capture_output=True,
                         text=True)
    if res.returncode != 0:
        hint = " (liburing-dev missing? `make setup` installs it)" if "liburing" in res.stderr else ""
        raise Unavailable(f"compiling {SOURCE.name} failed{hint}: {res.stderr.strip()[:500]}")
    tmp.replace(exe)
    return exe


@dataclass
class Role:
    """One running ioload process (reader or writer), started and waiting for "go"."""

    name: str
    proc: subprocess.Popen[str]
    argv: list[str]  # the command started (recorded in the run's meta.json)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def go(self, start_ns: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {start_ns}\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict[str, Any]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise RuntimeError(f"ioload {self.name} did not finish in {timeout:.0f} s") from None
        if self.proc.returncode != 0:
            raise RuntimeError(f"ioload {self.name} failed (status {self.proc.returncode}): {err.strip()}")
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def command(role: str, args: list[str], exe: Path | None = None) -> list[str]:
    """ioload's argv for one role (the binary as binary_path names it unless given: a dry run builds nothing)."""
    return [str(exe or binary_path()), role, *args]


def start(role: str, args: list[str], echo: Callable[[str, list[str]], None] | None = None) -> Role:
    """Start ioload and wait until it has opened the device and prints "ready"; echo (--verbose) is told the argv."""
    argv = command(role, args, build())
    if echo is not None:
        echo(f"ioload {role}", argv)
    # a worker: dies with kvds (PR_SET_PDEATHSIG) and `kvds restore` ends a survivor before detaching the device
    proc = workers.popen(argv, f"ioload {role}", stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"ioload {role} did not start: {err.strip() or line}")
    return Role(role, proc, argv)


if __name__ == "__main__":  # used by harness/setup/provision-io.sh
    print(build())
    sys.exit(0)
