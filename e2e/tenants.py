"""The other tenants: a concurrent spill writer on the slow tier's device and a memory hog in a memory
cgroup of its own (not the squeezed one: e2e/stack.py Squeeze says why), each at a stated intensity.

The spill writer is the I/O track's ioload writer (io_priority/ioload.c), its command line built by the I/O track's
own io_priority.workload.ioload_args from the cell's mapping: without intents it writes unpaced at the default
priority; with the intent mapping at the cold-spillable class's write priority, paced by spill scheduler v2 against
the decode loop's published due times (e2e/slack_page.py). In both it sits in a blkio cgroup capped at the stated
MB/s. Both tenants are workers (harness.knobs.workers): they die with kvds and `kvds restore` ends a survivor.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import knobs
from harness.mapping import Mapping
from io_priority import ioload_launch
from io_priority.device import Layout
from io_priority.workload import Workload, applied, ioload_args


@dataclass(frozen=True)
class Intensity:
    """What the tenants do, as stated in every result."""
    spill_mbps: float      # the spill writer's blkio cap (MB/s)
    spill_kib: int         # its write size (KiB; spill v2 chooses 128 KiB up to this)
    spill_qd: int          # its writes in flight
    hog_mib: int           # the hog's resident set, rewritten every pass
    hog_pause_ms: float    # its sleep between passes


def writer_argv(dev: str, replay_bytes: int, spill_bytes: int, it: Intensity, mapping: Mapping, seconds: float,
                scratch: Path, shm: Path, seed: int) -> list[str]:
    """ioload writer's options for one cell (the spill region follows the replay's slow-tier slots)."""
    w = Workload(duration_s=seconds, spill_bs=it.spill_kib << 10, spill_qd=it.spill_qd)
    _, writer = ioload_args(dev, Layout(kv_bytes=replay_bytes, spill_bytes=spill_bytes), w, applied(mapping, "psync"),
                            seed, scratch, shm)
    assert writer is not None
    return writer


def hog_argv(it: Intensity) -> list[str]:
    return [sys.executable, "-m", "e2e.hog", "--mib", str(it.hog_mib), "--pause-ms", f"{it.hog_pause_ms:g}"]


class SpillTenant:
    """One cell's writer: started before the cell's replay, ended after it (its bytes are read off the device)."""

    def __init__(self, args: list[str], cap: knobs.Cgroup) -> None:
        self.role = ioload_launch.start("writer", args)
        cap.add_pid(self.role.pid)
        self.role.go(time.monotonic_ns())

    @property
    def argv(self) -> list[str]:
        return self.role.argv

    def stop(self) -> None:
        self.role.kill()


def spill_cap(dev_t: tuple[int, int], mbps: float) -> knobs.Cgroup:
    """A blkio cgroup capping writes to the device at the stated MB/s (v1 throttle; v2 io.max)."""
    cg = knobs.create_cgroup("e2e-spill", ("blkio",))
    major, minor = dev_t
    bps = int(mbps * 1e6)
    if cg.version("blkio") == 1:
        cg.set("blkio", "blkio.throttle.write_bps_device", f"{major}:{minor} {bps}")
    else:
        cg.set("blkio", "io.max", f"{major}:{minor} wbps={bps}")
    return cg


class MemoryHog:
    """The hog, moved into `memcg` before it allocates; `stop` returns its measured intensity."""

    def __init__(self, it: Intensity, memcg: knobs.Cgroup) -> None:
        self.argv = hog_argv(it)
        self.proc = knobs.workers.popen(self.argv, "e2e memory hog", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        memcg.add_pid(self.proc.pid)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            raise RuntimeError(f"the memory hog did not start: {self.proc.communicate()[1].strip() or line}")

    def stop(self) -> dict[str, float]:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        lines = [x for x in (out or "").splitlines() if x.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
