"""Per-class memory-cgroup placement for one process, and the limit that squeezes.

memcg charges an anonymous page to the cgroup of the faulting task's mm owner *when the page is first
faulted*, and (with v1 `memory.move_charge_at_immigrate` = 0, the default, and always on v2) a task that
moves later leaves its pages' charges behind. So one process can split its arena: populate the "protect"
classes while it sits in an unlimited group, move, populate the "squeeze" classes in the limited group.
Lowering the limited group's limit then reclaims only pages charged there. A page swapped out and faulted
back is charged to the group recorded in its swap entry (still the group it was reclaimed from). The bench
checks the split on every run (`placement` in the summary: each group's charged bytes after populating).
On v2, the protect group additionally gets memory.min = its charge, the documented way to shield it.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import knobs
from harness.knobs.cgroups import Cgroup

V1 = {"limit": "memory.limit_in_bytes", "usage": "memory.usage_in_bytes", "failcnt": "memory.failcnt"}
V2 = {"limit": "memory.max", "usage": "memory.current"}


@dataclass
class Placement:
    protect: Cgroup
    squeeze: Cgroup

    @property
    def version(self) -> int:
        return self.squeeze.version("memory")

    def _files(self) -> dict[str, str]:
        return V1 if self.version == 1 else V2

    def usage(self, group: Cgroup) -> int:
        return int(group.get("memory", self._files()["usage"]).strip())

    def set_limit(self, group: Cgroup, n_bytes: int | None) -> None:
        """n_bytes=None removes the limit. On v1 the write itself reclaims down to the limit (synchronously, in
        the writer), failing with EBUSY if it cannot; on v2 memory.max reclaims likewise and never fails."""
        value = ("-1" if self.version == 1 else "max") if n_bytes is None else str(n_bytes)
        group.set("memory", self._files()["limit"], value)

    def protect_min(self, n_bytes: int) -> bool:
        """v2 only: memory.min on the protect group. Returns whether it was set."""
        if self.version != 2:
            return False
        self.protect.set("memory", "memory.min", str(n_bytes))
        return True

    def protect_low(self, n_bytes: int) -> bool:
        """v2 only: memory.low on the protect group (best effort: reclaimed only when nothing unprotected is
        left, never the OOM killer's cause). Returns whether it was set."""
        if self.version != 2:
            return False
        self.protect.set("memory", "memory.low", str(n_bytes))
        return True

    def limit_hits(self, group: Cgroup) -> int:
        """How often the limit was hit (v1 failcnt, v2 memory.events max)."""
        if self.version == 1:
            return int(group.get("memory", V1["failcnt"]).strip())
        for line in group.get("memory", "memory.events").splitlines():
            k, _, v = line.partition(" ")
            if k == "max":
                return int(v)
        return 0

    def stat(self, group: Cgroup) -> dict[str, int]:
        out = {}
        for line in group.get("memory", "memory.stat").splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
        return out

    def move_charge_at_immigrate(self) -> str | None:
        if self.version != 1:
            return None
        return self.squeeze.get("memory", "memory.move_charge_at_immigrate").strip()


def create_budget_split(tag: str) -> tuple[Cgroup, Placement]:
    """A budget group (kvds-<pid>-vm-<tag>-budget) with two children, protect ("critical") and squeeze ("spill").
    The limit goes on the parent, so a page charged to either child, faulted back while the process sits in the
    other, is charged under a limit whose subtree holds the process: reclaim or the OOM killer can always act.
    (Two flat groups cannot: a limited group left without a task can neither shrink below its unreclaimable
    charge nor kill anything, and a swap-in charged to it retries its fault for ever.)"""
    budget = knobs.create_cgroup(f"vm-{tag}-budget", ("memory",))
    return budget, Placement(knobs.create_child(budget, "critical"), knobs.create_child(budget, "spill"))


def create_placement(tag: str) -> Placement:
    """Two fresh groups (kvds-<pid>-vm-<tag>-protect / -squeeze); the journal removes them."""
    protect = knobs.create_cgroup(f"vm-{tag}-protect", ("memory",))
    squeeze = knobs.create_cgroup(f"vm-{tag}-squeeze", ("memory",))
    return Placement(protect, squeeze)
