"""`kvds report RUN [RUN...]`: a Markdown + HTML report from one or more suites, side by side."""

from __future__ import annotations

import argparse

from harness.commands import render
from harness.commands.report_run import ReportConfig, run
from harness.commands.summary import ReportSummary
from harness.verbs import Verb, add


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="suite or run ids (prefixes, paths or 'latest')")
    p.add_argument("--out", help="output directory (default: <first suite>/report, or results/report-<id>)")


def config(args: argparse.Namespace) -> ReportConfig:
    return ReportConfig(tuple(args.runs), args.out)


VERB = Verb("report", "write a report (Markdown, HTML, JSON) from stored runs", arguments, config, run, render.report,
            ReportSummary)


def register(sub: argparse._SubParsersAction) -> None:
    add(sub, VERB)
