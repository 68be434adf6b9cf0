"""What the eBPF track adds to the VM bench: per-task swap-in / reclaim / thrashing delays (taskstats).

A probe the host cannot run is skipped and the summary says why (`ebpf` key); a kvds error fails the bench. Delay
accounting is switched on through the knob journal (`kernel.task_delayacct`), so restore turns it off again.
"""

from __future__ import annotations

import os
from typing import Any

from harness import doctor, knobs
from harness.errors import Unavailable


class TaskDelays:
    """start(pid) before the squeeze, stop() after the re-access: the arena process's delay totals in between."""

    name = "taskstats"

    def __init__(self) -> None:
        from ebpf.taskstats import TaskstatsClient  # the eBPF track's module (ebpf/taskstats.py)

        knobs.sysctl("kernel.task_delayacct", 1)
        self._client = TaskstatsClient()
        self._pid: int | None = None
        self._before: Any = None

    def start(self, pid: int) -> None:
        # kernel.task_delayacct is host-wide: another kvds process that found it 0 puts it back to 0 when it
        # finishes, even while we measure. Re-assert it per repetition and flag a switch-off seen at the end.
        knobs.sysctl("kernel.task_delayacct", 1)
        self._pid = pid
        self._before = self._client.query(pid)

    def stop(self) -> dict[str, Any]:
        if self._pid is None:
            return {}
        after = self._client.query(self._pid)
        if after is None:
            return {"error": "arena process gone before the delays were read"}
        out = after.minus(self._before).as_dict()
        if knobs.read_knob("/proc/sys/kernel/task_delayacct") != "1":
            out["error"] = "kernel.task_delayacct was switched off during the measurement (by another process)"
        return out

    def close(self) -> None:
        self._client.close()


class ReclaimHistograms:
    """The eBPF track's reclaim probe (vmscan memcg/direct reclaim tracepoints) around squeeze + re-access.

    Follows the parent too: a v1 limit write reclaims synchronously in the writer, so the squeeze's own reclaim
    runs in the parent's context, and the re-access's in the arena process's (charging a swapped-in page)."""

    name = "reclaim"

    def __init__(self) -> None:
        self._rec: Any = None
        self._pids: dict[str, int] = {}

    def start(self, pid: int) -> None:
        from ebpf.recorder import Recorder

        self._pids = {"parent": os.getpid(), "arena": pid}
        self._rec = Recorder(("reclaim",), pids=[])
        self._rec.start()
        for p in self._pids.values():
            self._rec.add_pid(p)

    def stop(self) -> dict[str, Any]:
        if self._rec is None:
            return {}
        self._rec.stop()
        rc = self._rec.results().get("reclaim", {})
        self._rec = None
        out: dict[str, Any] = {"latency_hist": rc.get("latency", {})}
        for role, pid in self._pids.items():
            rec = rc.get("by_pid", {}).get(str(pid), {})
            out[role] = {k: v for k, v in rec.items() if k not in ("comm", "memory_cgroup")}
        return out

    def close(self) -> None:
        if self._rec is not None:
            self._rec.stop()


def probes(reclaim_histograms: bool = False) -> tuple[list[Any], dict[str, str]]:
    """The probes available here, and what the summary says about the eBPF track.

    Only a real absence on the host skips a probe (taskstats' own answer, the doctor's for the reclaim
    tracepoints); an exception inside kvds propagates and fails the bench instead of reading as "skipped"."""
    import ebpf.taskstats

    out: list[Any] = []
    notes: list[str] = []
    ok, reason = ebpf.taskstats.family_status()
    if ok:
        out.append(TaskDelays())
        notes.append("taskstats: swap-in/reclaim/thrashing delays of the arena process")
    else:
        notes.append(f"taskstats skipped: {reason}")
    if reclaim_histograms:
        try:
            doctor.require("ebpf.probe.reclaim", area="ebpf")
        except Unavailable as exc:
            notes.append(f"reclaim histograms skipped: {exc}")
        else:
            out.append(ReclaimHistograms())
            notes.append("reclaim: memcg/direct reclaim latency histograms of parent (limit write) and arena")
    else:
        notes.append("reclaim histograms: off (pass --ebpf)")
    return out, {"status": "+".join(p.name for p in out) or "skipped", "reason": "; ".join(notes)}
