"""The summary of a command run on several targets (`kvds remote doctor`, `kvds remote run`): each host's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.remote.dispatch import exit_status
from harness.results import StoredSummary


@dataclass
class TargetsSummary(StoredSummary):
    """Each target's outcome (harness/remote/execute.py HostOutcome, with its doctor rows), by tag."""
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag -> status, reason, exit status, runs, ...
    argv: list[str] = field(default_factory=list)  # the kvds command line each host ran
    record: str = ""  # the invocation record (its run directory on this machine)

    def exit_status(self) -> int:
        return exit_status(h["status"] for h in self.hosts.values())
