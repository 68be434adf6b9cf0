"""`kvds report RUN [RUN...]`: a Markdown + HTML report from one or more suites, side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.errors import UserError
from harness.report.build import build_report
from harness.report.context import load_suites
from harness.results import ResultStore


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a report (Markdown, HTML, JSON) from stored runs")
    p.add_argument("runs", nargs="+", metavar="RUN", help="suite or run ids (prefixes, paths or 'latest')")
    p.add_argument("--out", help="output directory (default: <first suite>/report, or results/report-<id>)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = ResultStore()
    suites = load_suites(args.runs, store)
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # /proc/x, a path under a file, a read-only tree: the user's path, not a bug
            raise UserError(f"--out {args.out}: cannot create the directory: {exc.strerror}") from None
    elif suites[0].run is not None:
        out = suites[0].run.path / "report"
    else:
        out = store.root / f"report-{suites[0].runs[0].run_id}"
    paths = build_report(suites, out)
    if args.json:
        emit(None, {"paths": {k: str(v) for k, v in paths.items()}}, True)
    else:
        for k, v in paths.items():
            print(f"{k:9s} {v}")
    return 0
