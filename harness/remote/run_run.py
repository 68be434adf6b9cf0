"""`kvds remote run`'s work: run any kvds command line on the targets and fetch the runs it filed."""

from __future__ import annotations

from dataclasses import dataclass

from harness.remote.args import SshOptions
from harness.remote.dispatch import dispatch
from harness.remote.outcomes import TargetsSummary
from harness.remote.summary import as_json
from harness.remote.targets import Target
from harness.results import Filed


@dataclass(frozen=True)
class RunConfig:
    argv: tuple[str, ...]  # the kvds command line (checked by the parser already)
    targets: tuple[Target, ...]
    ssh: SshOptions
    json_flag: bool = True  # the command takes --json (its hosts then report their summary)


@dataclass
class RunSummary(TargetsSummary):
    """`kvds remote run`: every target's outcome of the command."""


def run(cfg: RunConfig) -> Filed[RunSummary]:
    record, outcomes = dispatch(list(cfg.argv), cfg.targets, cfg.ssh, json_flag=cfg.json_flag)
    return Filed(record, RunSummary(as_json(outcomes, str(record.path))["hosts"], list(cfg.argv), str(record.path)))
