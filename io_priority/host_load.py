"""How busy the host was with work that is not the benchmark's, per repetition: the figure that says whether a
host verdict can be judged at all.

A host run shares its CPUs and its virtual disk with whatever else runs; a repetition taken while a `git clone`
or a compiler ran beside it measures them too (the I/O track saw its verdict flip from met to missed at load
average 1-3.6). Per repetition this meter records:

- foreign CPU: CPU time (in cores) spent by user processes outside kvds's process tree = all user + nice +
  system time (/proc/stat) minus kvds's own (os.times, children included once reaped) minus kernel threads'
  (the loop device's kworker does kvds's I/O);
- steal: the share of CPU time the hypervisor gave to other guests (/proc/stat steal);
- CPU pressure: the share of the repetition in which some runnable task waited for a CPU (/proc/pressure/cpu);
- the 1-minute load average at the end (for the record; it lags, so it decides nothing).

A repetition is *busy* when foreign CPU exceeds FOREIGN_CORES_LIMIT or steal exceeds STEAL_LIMIT;
io_priority/load_rule.py sets busy repetitions aside, and a verdict with too few quiet ones left says "not judged:
host busy" instead of flipping between met and missed.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FOREIGN_CORES_LIMIT = 0.25
"""A quarter of a core of other work: about what one interactive shell and an editor cost; a `git clone`, a
compiler or a test suite beside the bench exceeds it."""
STEAL_LIMIT = 0.05
"""5% of CPU time taken by the hypervisor: the vCPUs themselves were descheduled."""

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_line() -> list[int]:
    with open("/proc/stat") as fh:
        return [int(x) for x in fh.readline().split()[1:]]


def _kthreads_ticks() -> int:
    """utime + stime of every kernel thread (children of kthreadd, pid 2), in clock ticks."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[1] == "2" or d.name == "2":  # ppid 2: a kernel thread
            total += int(fields[11]) + int(fields[12])
    return total


def _psi_cpu_some_us() -> int | None:
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except OSError:
        return None
    return int(line.rsplit("total=", 1)[1])


@dataclass(frozen=True)
class LoadSample:
    """The host's load over one repetition."""
    seconds: float             # wall time the sample covers
    foreign_cores: float       # CPU time of other work / wall time (1.0 = one core busy with it)
    own_cores: float           # kvds's own CPU time (this process and its reaped children) / wall time
    steal_share: float         # steal / all CPU time
    cpu_pressure_share: float | None  # time some task waited for a CPU / wall time (None: no PSI)
    loadavg_1min: float        # at the end of the repetition

    @property
    def busy(self) -> bool:
        return self.foreign_cores > FOREIGN_CORES_LIMIT or self.steal_share > STEAL_LIMIT

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "busy": self.busy}


class LoadMeter:
    """start() before a repetition, stop() after its processes were reaped; stop returns the LoadSample."""

    def start(self) -> None:
        self._t = time.monotonic()
        self._cpu = _cpu_line()
        self._own = self._own_ticks()
        self._kthreads = _kthreads_ticks()
        self._psi = _psi_cpu_some_us()

    @staticmethod
    def _own_ticks() -> float:
        t = os.times()
        return (t.user + t.system + t.children_user + t.children_system) * _TICK

    def stop(self) -> LoadSample:
        wall = max(time.monotonic() - self._t, 1e-9)
        cpu = [b - a for a, b in zip(self._cpu, _cpu_line())]
        user, nice, system = cpu[0], cpu[1], cpu[2]
        steal = cpu[7] if len(cpu) > 7 else 0
        all_ticks = max(sum(cpu[:8]), 1)
        own = self._own_ticks() - self._own
        kthreads = _kthreads_ticks() - self._kthreads
        foreign = max(0.0, (user + nice + system - own - kthreads) / _TICK) / wall
        psi = _psi_cpu_some_us()
        pressure = None if psi is None or self._psi is None else (psi - self._psi) / 1e6 / wall
        return LoadSample(wall, foreign, own / _TICK / wall, steal / all_ticks, pressure, os.getloadavg()[0])

