"""One capability of a host, as `kvds doctor` reports it and tests skip on it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["available", "unavailable", "needs-root"]


@dataclass(frozen=True)
class Capability:
    name: str
    status: Status
    reason: str
    area: str = "system"

    @property
    def ok(self) -> bool:
        return self.status == "available"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def available(name: str, reason: str, area: str) -> Capability:
    return Capability(name, "available", reason, area)


def unavailable(name: str, reason: str, area: str) -> Capability:
    return Capability(name, "unavailable", reason, area)
