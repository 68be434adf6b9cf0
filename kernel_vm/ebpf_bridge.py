"""What the eBPF track adds when it is present: per-task swap-in / reclaim / thrashing delays (taskstats).

Optional by design: the bench runs without it and says why in the summary (`ebpf` key). Delay accounting
is switched on through the knob journal (`kernel.task_delayacct`), so restore turns it off again.
"""

from __future__ import annotations

from typing import Any

from harness import knobs


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
        self._pid = pid
        self._before = self._client.query(pid)

    def stop(self) -> dict[str, Any]:
        if self._pid is None:
            return {}
        after = self._client.query(self._pid)
        if after is None:
            return {"error": "arena process gone before the delays were read"}
        return after.minus(self._before).as_dict()

    def close(self) -> None:
        self._client.close()


def probes() -> tuple[list[Any], dict[str, str]]:
    """The probes available here, and what the summary says about the eBPF track."""
    try:
        import ebpf.taskstats  # noqa: F401
    except ImportError as exc:
        return [], {"status": "skipped", "reason": f"eBPF track not present ({exc}); waits on the eBPF issue"}
    try:
        ok, reason = ebpf.taskstats.family_status()
        if not ok:
            return [], {"status": "skipped", "reason": reason}
        return [TaskDelays()], {"status": "taskstats", "reason": "swap-in/reclaim/thrashing delays of the "
                                "arena process; reclaim histograms are not wired in yet"}
    except Exception as exc:
        return [], {"status": "skipped", "reason": f"{type(exc).__name__}: {exc}"}
