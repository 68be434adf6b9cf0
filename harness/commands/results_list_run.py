"""`kvds results list`'s work: the runs in the results store."""

from __future__ import annotations

from dataclasses import dataclass

from harness.commands.summary import ResultsListSummary
from harness.results import Filed, ResultStore


@dataclass(frozen=True)
class ResultsListConfig:
    kind: str | None = None  # only runs of this kind (io-bench, vm-bench, ...)


def run(cfg: ResultsListConfig) -> Filed[ResultsListSummary]:
    runs = ResultStore().runs(cfg.kind)
    return Filed(None, ResultsListSummary([{"run_id": r.run_id, "kind": r.meta.get("kind"), "path": str(r.path)}
                                           for r in runs]))
