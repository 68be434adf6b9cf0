"""`kvds report`'s work: a Markdown + HTML + JSON report from stored suites and runs, side by side."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.commands.summary import ReportSummary
from harness.errors import UserError
from harness.report.build import build_report
from harness.report.context import load_suites
from harness.results import Filed, ResultStore


@dataclass(frozen=True)
class ReportConfig:
    runs: tuple[str, ...]  # suite or run ids, prefixes, paths or 'latest'
    out: str | None = None  # default: <first suite>/report, or <results>/report-<first run id>


def run(cfg: ReportConfig) -> Filed[ReportSummary]:
    store = ResultStore()
    suites = load_suites(list(cfg.runs), store)
    if cfg.out:
        out = Path(cfg.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # /proc/x, a path under a file, a read-only tree: the user's path, not a bug
            raise UserError(f"--out {cfg.out}: cannot create the directory: {exc.strerror}") from None
    elif suites[0].run is not None:
        out = suites[0].run.path / "report"
    else:
        out = store.root / f"report-{suites[0].runs[0].run_id}"
    paths = build_report(suites, out)
    return Filed(None, ReportSummary({k: str(v) for k, v in paths.items()}))
