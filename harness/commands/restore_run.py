"""`kvds restore`'s work: replay the journals that killed kvds processes left, undoing their knob changes."""

from __future__ import annotations

from dataclasses import dataclass

from harness import journal
from harness.commands.summary import RestoreSummary
from harness.results import Filed


@dataclass(frozen=True)
class RestoreConfig:
    include_live: bool = False  # also the journals of kvds processes still running (dangerous)


def run(cfg: RestoreConfig) -> Filed[RestoreSummary]:
    reports = journal.restore_orphans(include_live=cfg.include_live)
    return Filed(None, RestoreSummary([{"journal": str(r.journal), "undone": r.undone, "failed": r.failed}
                                       for r in reports]))
