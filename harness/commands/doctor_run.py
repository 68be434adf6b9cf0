"""`kvds doctor`'s work: probe the selected capabilities; a probe that failed inside kvds goes to stderr whole."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from harness.capability import Capability
from harness.commands.summary import DoctorSummary
from harness.results import Filed


@dataclass(frozen=True)
class DoctorConfig:
    capabilities: tuple[Capability, ...]  # probed already: selecting a capability by name runs its probe


def run(cfg: DoctorConfig) -> Filed[DoctorSummary]:
    for c in cfg.capabilities:
        if c.is_error:
            print(f"kvds doctor: kvds error probing {c.name}:\n{c.traceback}", file=sys.stderr)
    return Filed(None, DoctorSummary([c.as_dict() for c in cfg.capabilities]))
