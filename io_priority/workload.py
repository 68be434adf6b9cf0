"""One repetition of the I/O workload: the critical reader alone or with the spill writer, as a mapping says.

A variant names the mapping applied (None = the reader alone, the unloaded reference). The mapping's
decode-critical class gives the reader's priority (read_ioprio for psync, uring_ioprio for io_uring); its
cold-spillable class gives the writer's priority (write_ioprio; the per-SQE priority for io_uring), a write
bandwidth cap (write_throttle_mbps, through a v1 blkio cgroup holding the writer) and spill pacing.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from harness.errors import UserError
from harness.intent import IntentClass
from harness.ioprio import IoPrio
from harness.knobs import Cgroup, create_cgroup, create_file
from harness.mapping import Mapping
from harness.paths import work_dir
from io_priority import ioload_launch
from io_priority.blocktrace import BlockIssueTrace
from io_priority.device import Device
from io_priority.host_load import LoadSample

ENGINES = ("psync", "io_uring")
SPILL_KINDS = ("direct", "buffered")
# How the critical reader waits for a read's due time (and, io_uring, for its completion): "sleep" in
# clock_nanosleep and a blocking io_uring_enter, as fio's rate limiting does; "spin" on the clock and a polled
# completion queue, as a busy serving thread does. Wake-up lateness (one of the three clocks) depends on it.
WAITS = ("sleep", "spin")


@dataclass(frozen=True)
class Workload:
    engine: str = "psync"
    duration_s: float = 5.0
    read_bs: int = 16 << 10
    rate: float = 200.0  # critical reads per second (one per decode step); 0 = closed loop at QD1
    spill_bs: int = 1 << 20
    spill_qd: int = 8
    spill_kind: str = "direct"
    fsync_every: int = 64 << 20  # buffered spill: fsync after this many bytes (0: only the final fsync)
    # buffered spill: vm.dirty_background_ratio (%) for the run. Not dirty_background_bytes: its "unset" value
    # 0 cannot be written back (EINVAL), so the journal could not restore it.
    dirty_background_ratio: int | None = None
    guard_us: int = 100  # the pacer's margin before a critical read is due
    budget_devs: float = 2.0  # the pacer budgets mean + this many mean deviations of a write's device time
    wait: str = "sleep"  # the reader's wait (WAITS)
    spill_bs_min: int = 128 << 10  # spill scheduler v2: the smallest write size it may choose
    model_q: float = 0.95  # spill scheduler v2: the quantile of observed batch times it budgets

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Applied:
    """What a mapping turns into for this workload (recorded with every result)."""

    read_prio: IoPrio | None
    write_prio: IoPrio | None
    throttle_mbps: float | None
    pacing: str
    wbt_lat_usec: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"read_ioprio": str(self.read_prio) if self.read_prio else None,
                "write_ioprio": str(self.write_prio) if self.write_prio else None,
                "write_throttle_mbps": self.throttle_mbps, "spill_pacing": self.pacing,
                "wbt_lat_usec": self.wbt_lat_usec}


def applied(mapping: Mapping, engine: str) -> Applied:
    crit = mapping.for_class(IntentClass.DECODE_CRITICAL)
    spill = mapping.for_class(IntentClass.COLD_SPILLABLE)
    read = crit.uring_ioprio if engine == "io_uring" and crit.uring_ioprio else crit.read_ioprio
    return Applied(read, spill.write_ioprio, spill.write_throttle_mbps, spill.spill_pacing or "none",
                   getattr(spill, "wbt_lat_usec", None))


@dataclass
class RepResult:
    latencies_ns: np.ndarray
    reader: dict[str, Any]
    writer: dict[str, Any] | None
    block: dict[str, Any] | None
    ebpf: dict[str, Any] | None = None
    # per read (ioload --ctx-out): service_ns << 2 | bits; bit 0 a spill write was in flight at issue, bit 1
    # one was submitted while the read was in flight
    contexts: np.ndarray | None = None
    # per read (ioload --clocks-out): due, submit, complete (CLOCK_MONOTONIC ns), one row per latency
    clocks: np.ndarray | None = None
    # per spill write (ioload --wlog-out): submit, complete (ns), bytes
    wlog: np.ndarray | None = None
    # block layer issue -> complete pairs on the device (tracefs): issue_ns, complete_ns, op, class, level
    blk_pairs: np.ndarray | None = None
    # the ioload commands that ran this repetition: {"reader": argv, "writer": argv or absent}
    argv: dict[str, list[str]] | None = None
    # the host's load over the repetition (io_priority/host_load.py): other work's CPU, steal, CPU pressure
    host_load: LoadSample | None = None

    @property
    def service_ns(self) -> np.ndarray | None:
        """Each read's device time: completion - actual issue (its lateness behind earlier reads excluded)."""
        if self.contexts is None or self.contexts.size != self.latencies_ns.size:
            return None
        return self.contexts >> 2

    @property
    def overlapped(self) -> np.ndarray | None:
        """True for the reads that shared the device with a spill write."""
        if self.contexts is None or self.contexts.size != self.latencies_ns.size:
            return None
        return (self.contexts & 3) != 0

    @property
    def has_clocks(self) -> bool:
        return self.clocks is not None and self.clocks.shape[0] == self.latencies_ns.size

    def _on_time_e2e(self) -> np.ndarray:
        """End-to-end each read would have had if the reader had always woken on time: the same service times,
        run serially from each read's due time (read i starts at max(due_i, completion of read i-1))."""
        cached = self.__dict__.get("_on_time")
        if cached is not None:
            return cached
        due, svc = self.clocks[:, 0], self.clocks[:, 2] - self.clocks[:, 1]
        out = np.empty(due.size, dtype=np.int64)
        done = np.iinfo(np.int64).min
        for i in range(due.size):
            done = max(int(due[i]), done) + int(svc[i])
            out[i] = done - int(due[i])
        self.__dict__["_on_time"] = out
        return out

    @property
    def wakeup_ns(self) -> np.ndarray | None:
        """Host lateness: end-to-end minus what it would have been had the reader woken on time (_on_time_e2e).
        It counts the reader's own late wake-up and the lateness an earlier late wake-up carried into it (reads
        queued behind a reader that was not running); never negative."""
        if not self.has_clocks:
            return None
        return np.maximum(self.latencies_ns - self._on_time_e2e(), 0)

    @property
    def backlog_ns(self) -> np.ndarray | None:
        """Device lateness: waiting, on time, for the previous reads' service (a serial reader behind a slow
        read): on-time end-to-end minus the read's own service time."""
        if not self.has_clocks:
            return None
        return np.maximum(self._on_time_e2e() - (self.clocks[:, 2] - self.clocks[:, 1]), 0)

    @property
    def service_clock_ns(self) -> np.ndarray | None:
        """Submit -> complete from the clocks (the same figure as service_ns, kept from one source)."""
        return None if not self.has_clocks else self.clocks[:, 2] - self.clocks[:, 1]

    @property
    def spill_mb_s(self) -> float | None:
        if not self.writer:
            return None
        return self.writer["bytes"] / 1e6 / ((self.writer["elapsed_ns"] + self.writer["final_fsync_ns"]) / 1e9)


class Runner:
    """Runs repetitions on one device; owns the scratch directory, the pacing page and the throttle cgroup."""

    def __init__(self, device: Device, workload: Workload, trace: BlockIssueTrace | None,
                 echo: Callable[[str, list[str]], None] | None = None) -> None:
        if workload.engine not in ENGINES:
            raise UserError(f"engine must be one of {', '.join(ENGINES)}")
        if workload.spill_kind not in SPILL_KINDS:
            raise UserError(f"spill kind must be one of {', '.join(SPILL_KINDS)}")
        if workload.wait not in WAITS:
            raise UserError(f"wait must be one of {', '.join(WAITS)}")
        self.device, self.w, self.trace = device, workload, trace
        self.echo = echo  # --verbose: told each helper's argv as it starts
        self.scratch = work_dir() / f"io-run-{os.getpid()}-{secrets.token_hex(3)}"
        from harness.knobs import create_dir
        create_dir(self.scratch)
        self.shm = create_file(Path("/dev/shm") / f"kvds-io-slack-{os.getpid()}-{secrets.token_hex(3)}", 4096)
        self._cgroups: dict[float, Cgroup] = {}
        self._wbt_default: str | None = None

    def _wbt_path(self) -> Path:
        return Path("/sys/block") / self.device.name / "queue" / "wbt_lat_usec"

    def _apply_wbt(self, plan: Applied | None) -> None:
        """queue/wbt_lat_usec of the benchmark device as the variant's mapping asks (journaled; the device's own
        value for variants that do not ask). Never on the root disk (device.py refuses it as a benchmark device;
        checked again here because this is a write to its queue)."""
        from harness.knobs import read_knob, write_knob
        from harness.knobs.guards import _disk_of, root_disks

        path = self._wbt_path()
        if not path.exists():
            if plan is not None and plan.wbt_lat_usec is not None:
                raise UserError(f"{self.device.path} has no queue/wbt_lat_usec (writeback throttling)")
            return
        if self._wbt_default is None:
            self._wbt_default = read_knob(path)
        want = str(plan.wbt_lat_usec) if plan is not None and plan.wbt_lat_usec is not None else self._wbt_default
        if read_knob(path) != want:
            if _disk_of(self.device.name) in root_disks():
                raise UserError(f"refusing to change {path}: the root disk is not kvds's to tune")
            write_knob(path, want)

    def _throttle_group(self, mbps: float) -> Cgroup:
        if mbps not in self._cgroups:
            cg = create_cgroup(f"io-spill-{len(self._cgroups)}", ("blkio",))
            major, minor = self.device.dev_t
            bps = int(mbps * 1e6)
            if cg.version("blkio") == 1:
                cg.set("blkio", "blkio.throttle.write_bps_device", f"{major}:{minor} {bps}")
            else:
                cg.set("blkio", "io.max", f"{major}:{minor} wbps={bps}")
            self._cgroups[mbps] = cg
        return self._cgroups[mbps]

    def run(self, plan: Applied | None, seed: int, reader_extra: list[str] | None = None) -> RepResult:
        """plan None: reader alone, default priority. Otherwise reader + spill writer under `plan`.
        reader_extra: more ioload reader options (fio-check's io_uring A/B: --uring-flags, --reap)."""
        out = self.scratch / f"lat-{seed}.bin"
        ctx_out = self.scratch / f"ctx-{seed}.bin"
        clk_out = self.scratch / f"clk-{seed}.bin"
        wlog_out = self.scratch / f"wlog-{seed}.bin"
        reader_args, writer_args = ioload_args(self.device.path, self.device.layout, self.w, plan, seed,
                                               self.scratch, self.shm, reader_extra)
        if plan is not None:  # shared page: the pacer's slack, and which reads overlapped a spill write
            self.shm.write_bytes(bytes(4096))
        self._apply_wbt(plan)
        if self.trace:
            self.trace.clear()
        reader = ioload_launch.start("reader", reader_args, self.echo)
        writer = None
        try:
            if writer_args is not None:
                writer = ioload_launch.start("writer", writer_args, self.echo)
                if plan is not None and plan.throttle_mbps:
                    self._throttle_group(plan.throttle_mbps).add_pid(writer.pid)
            start_ns = time.monotonic_ns() + 50_000_000
            reader.go(start_ns)
            if writer:
                writer.go(start_ns)
            timeout = self.w.duration_s * 4 + 60
            rres = reader.result(timeout)
            wres = writer.result(timeout) if writer else None
        finally:
            reader.kill()
            if writer:
                writer.kill()
        lat = np.fromfile(out, dtype=np.int64)
        out.unlink(missing_ok=True)
        ctx = np.fromfile(ctx_out, dtype=np.int64) if ctx_out.exists() else None
        clk = np.fromfile(clk_out, dtype=np.int64).reshape(-1, 3) if clk_out.exists() else None
        wlog = np.fromfile(wlog_out, dtype=np.int64).reshape(-1, 3) if wlog_out.exists() else None
        for f in (ctx_out, clk_out, wlog_out):
            f.unlink(missing_ok=True)
        counts = self.trace.collect() if self.trace else None
        argv = {"reader": reader.argv, **({"writer": writer.argv} if writer else {})}
        return RepResult(lat, rres, wres, counts.as_dict() if counts else None, contexts=ctx, clocks=clk,
                         wlog=wlog, blk_pairs=counts.pairs if counts else None, argv=argv)


def ioload_args(dev_path: str, lay: Any, w: Workload, plan: Applied | None, seed: int, scratch: Path, shm: Path,
                reader_extra: list[str] | None = None) -> tuple[list[str], list[str] | None]:
    """One pure function builds both ioload command lines of a repetition (reader; writer, None for the reader
    alone): what Runner.run starts and what `kvds io bench --dry-run` prints."""
    ms = str(int(w.duration_s * 1000))
    reader = ["--dev", dev_path, "--engine", w.engine, "--bs", str(w.read_bs), "--off", "0",
              "--len", str(lay.kv_bytes), "--rate", str(w.rate), "--duration-ms", ms,
              "--out", str(scratch / f"lat-{seed}.bin"), "--seed", str(seed + 1),
              "--prio", str(plan.read_prio.value if plan and plan.read_prio else -1),
              "--ctx-out", str(scratch / f"ctx-{seed}.bin"), "--clocks-out", str(scratch / f"clk-{seed}.bin"),
              "--wait", w.wait, *(reader_extra or [])]
    if plan is None:
        return reader, None
    reader += ["--shm", str(shm)]
    writer = ["--dev", dev_path, "--engine", w.engine, "--bs", str(w.spill_bs),
              "--off", str(lay.spill_offset), "--len", str(lay.spill_bytes), "--qd", str(w.spill_qd),
              "--duration-ms", ms, "--prio", str(plan.write_prio.value if plan.write_prio else -1),
              "--fsync-every", str(w.fsync_every), "--guard-us", str(w.guard_us),
              "--budget-devs", str(w.budget_devs), "--shm", str(shm)]
    if w.spill_kind == "buffered":
        writer.append("--buffered")
    if plan.pacing == "slack":
        writer += ["--pace", "slack"]
    elif plan.pacing == "deadline":  # spill scheduler v2: its own io_uring batches
        writer += ["--pace", "deadline", "--bs-min", str(min(w.spill_bs_min, w.spill_bs)), "--model-q", str(w.model_q)]
    writer += ["--wlog-out", str(scratch / f"wlog-{seed}.bin")]
    return reader, writer
