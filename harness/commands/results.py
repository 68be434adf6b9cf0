"""`kvds results list|show`: find runs in the results store and print their summaries."""

from __future__ import annotations

import argparse

from harness.commands import render, results_list_run, results_show_run
from harness.commands.summary import ResultsListSummary, ResultsShowSummary
from harness.verbs import Verb, add


def list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", help="only runs of this kind (io-bench, vm-bench, ...)")


def show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id, unique prefix, path, or 'latest'")


LIST = Verb("list", "list runs", list_arguments, lambda args: results_list_run.ResultsListConfig(args.kind),
            results_list_run.run, render.results_list, ResultsListSummary)
SHOW = Verb("show", "print one run's meta and summary", show_arguments,
            lambda args: results_show_run.ResultsShowConfig(args.run), results_show_run.run, render.results_show,
            ResultsShowSummary, results_line=False)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="list and show stored runs")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    add(verbs, LIST)
    add(verbs, SHOW)
