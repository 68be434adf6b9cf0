"""One capability of a host, as `kvds doctor` reports it and tests skip on it.

Four answers, and the difference matters: *available*; *unavailable* (the host lacks it, the reason says what
is missing); *needs-root*; and *error*: kvds itself failed while finding out (an exception in kvds's code, its
own BPF object, its own package). An error is never a skip: tests gated on it fail and `kvds doctor` exits 1.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["available", "unavailable", "needs-root", "error"]
STATUSES: tuple[Status, ...] = ("available", "unavailable", "needs-root", "error")


@dataclass(frozen=True)
class Capability:
    name: str
    status: Status
    reason: str
    area: str = "system"
    traceback: str = ""  # for status "error": where kvds failed

    @property
    def ok(self) -> bool:
        return self.status == "available"

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    def as_dict(self) -> dict[str, str]:
        d = asdict(self)
        if not self.traceback:
            del d["traceback"]
        return d


def available(name: str, reason: str, area: str) -> Capability:
    return Capability(name, "available", reason, area)


def unavailable(name: str, reason: str, area: str) -> Capability:
    return Capability(name, "unavailable", reason, area)


def kvds_error(name: str, what: str, area: str, exc: BaseException) -> Capability:
    """An exception inside kvds while probing `name`: status error, with the traceback kept for the log."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Capability(name, "error", f"kvds error while {what}: {type(exc).__name__}: {exc}", area, tb)
