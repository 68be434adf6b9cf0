"""`kvds results show`'s work: one stored run's meta, summary and sample names (the run is the one filed)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.commands.summary import ResultsShowSummary
from harness.results import Filed, ResultStore


@dataclass(frozen=True)
class ResultsShowConfig:
    run: str  # run id, unique prefix, path, or 'latest'


def run(cfg: ResultsShowConfig) -> Filed[ResultsShowSummary]:
    r = ResultStore().get(cfg.run)
    return Filed(r, ResultsShowSummary(r.run_id, r.meta, r.summary, r.sample_names()))
