"""`kvds results list|show`: find runs in the results store and print their summaries."""

from __future__ import annotations

import argparse

from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.results import ResultStore


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="list and show stored runs")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    ls = verbs.add_parser("list", help="list runs")
    ls.add_argument("--kind", help="only runs of this kind (io-bench, vm-bench, ...)")
    add_json_flag(ls)
    ls.set_defaults(func=run_list)
    show = verbs.add_parser("show", help="print one run's meta and summary")
    show.add_argument("run", help="run id, unique prefix, path, or 'latest'")
    add_json_flag(show)
    show.set_defaults(func=run_show)


def run_list(args: argparse.Namespace) -> int:
    runs = ResultStore().runs(args.kind)
    if args.json:
        emit(None, {"runs": [{"run_id": r.run_id, "kind": r.meta.get("kind"), "path": str(r.path)} for r in runs]}, True)
    else:
        for r in runs:
            print(f"{r.run_id}  {r.meta.get('kind')}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    r = ResultStore().get(args.run)
    emit(r, {"run_id": r.run_id, "meta": r.meta, "summary": r.summary, "samples": r.sample_names()}, True)
    return 0
