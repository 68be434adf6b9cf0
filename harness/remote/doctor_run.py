"""`kvds remote doctor`'s work: ship kvds to the targets and run `kvds doctor` on each."""

from __future__ import annotations

from dataclasses import dataclass

from harness.remote.args import SshOptions
from harness.remote.dispatch import dispatch
from harness.remote.outcomes import TargetsSummary
from harness.remote.summary import as_json
from harness.remote.targets import Target
from harness.results import Filed


@dataclass(frozen=True)
class DoctorConfig:
    targets: tuple[Target, ...]
    ssh: SshOptions


@dataclass
class DoctorSummary(TargetsSummary):
    """`kvds remote doctor`: every target's `kvds doctor`, side by side."""


def run(cfg: DoctorConfig) -> Filed[DoctorSummary]:
    record, outcomes = dispatch(["doctor"], cfg.targets, cfg.ssh)
    return Filed(record, DoctorSummary(as_json(outcomes, str(record.path))["hosts"], ["doctor"], str(record.path)))
