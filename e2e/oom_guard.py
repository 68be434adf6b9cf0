"""Keeps kvds in its squeezed memory group where it cannot be made unkillable there (cgroup v1 without
CAP_SYS_RESOURCE, this host's sandbox). The group's OOM killer is switched off (v1 `memory.oom_control`): a charge
that reclaim cannot meet then fails instead of killing kvds, an in-kernel one with ENOMEM (as with kvds unkillable),
a page fault by sleeping until the group frees memory or its limit rises. kvds is the group's only process, so
nothing would wake it: this guard, a process outside the group, waits for the group's OOM notifications
(`cgroup.event_control`) and on each raises the group's limit by one step, which wakes the fault, and counts the
raises, so the squeeze that gave way is said, never hidden. Each wait's time (CLOCK_MONOTONIC when the guard woke)
and the guard's response (woken to limit written) are kept: kvds places the waits in its decode steps
(e2e/step_stalls.py), and the response is the measured part of a waiting fault's sleep, which no delay counter
holds.

Run as `python -m e2e.oom_guard <group directory> <step bytes>`: prints "ready" once registered, and its counts as
one JSON line when its stdin closes; a journaled worker (harness/knobs/workers.py): it dies with kvds. Its writes are
values inside a group kvds created; removing the group (the journal's undo of its creation) removes them.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.knobs import workers
from harness.results import dumps


def _under_oom(group: Path) -> bool:
    fields = dict(line.split() for line in (group / "memory.oom_control").read_text().splitlines() if line)
    return fields.get("under_oom") == "1"


def guard(group: Path, step: int) -> dict[str, Any]:
    """Wait for the group's OOM notifications and raise its limit `step` bytes on each, until stdin closes."""
    efd = os.eventfd(0, os.EFD_CLOEXEC)
    ctl = os.open(group / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
    (group / "cgroup.event_control").write_text(f"{efd} {ctl}")
    print("ready", flush=True)
    counts: dict[str, Any] = {"oom_waits": 0, "limit_raised_bytes": 0, "wait_at_ns": [], "response_ns": []}
    while True:
        ready, _, _ = select.select([efd, 0], [], [])
        if 0 in ready and not os.read(0, 4096):
            return counts
        if efd not in ready:
            continue
        os.eventfd_read(efd)
        woke = time.monotonic_ns()
        try:
            if not _under_oom(group):  # the group's removal signals too
                continue
            limit = group / "memory.limit_in_bytes"
            limit.write_text(str(int(limit.read_text()) + step))
        except OSError:  # the group is gone
            return counts
        counts["oom_waits"] += 1
        counts["limit_raised_bytes"] += step
        counts["wait_at_ns"].append(woke)
        counts["response_ns"].append(time.monotonic_ns() - woke)


class GuardProcess:
    """kvds's handle on a running guard (start it while kvds is still outside the group: its own pages are then
    charged elsewhere)."""

    def __init__(self, group: Path, step: int) -> None:
        self.proc = workers.popen([sys.executable, "-m", "e2e.oom_guard", str(group), str(step)],
                                  f"e2e OOM guard of {group.name}", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            self.proc.wait()
            raise OSError(f"the OOM guard of {group} did not start ({line or 'no output'})")

    def stop(self) -> dict[str, Any]:
        """End the guard; its counts (raises of the group's limit, bytes raised) and each wait's time and response
        (ns lists `wait_at_ns`, `response_ns`)."""
        out, _ = self.proc.communicate(timeout=30)
        return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m e2e.oom_guard <memory group directory> <step bytes>", file=sys.stderr)
        return 2
    group = Path(argv[0])
    try:
        counts = guard(group, int(argv[1]))
    finally:  # a guard that stops guarding hands the group back to its OOM killer: a fault left waiting is woken
        # (and may be killed) rather than left asleep for good
        try:
            (group / "memory.oom_control").write_text("0")
        except OSError:
            pass
    print(dumps(counts, indent=None), flush=True)  # one line: the parent reads the last
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
