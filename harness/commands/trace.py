"""`kvds trace stats FILE`: read a KV intent trace, classify every event's block, and count.

A quick check that a trace is well-formed (every field mapped or rejected with file:line) and of what the
intent classifier makes of it, before a simulator or replay spends minutes on it.
"""

from __future__ import annotations

import argparse

from harness.commands import render
from harness.commands.summary import TraceStatsSummary
from harness.commands.trace_stats_run import TraceStatsConfig, run
from harness.verbs import Verb, add


def stats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="trace file (the public prototype's JSONL format)")


STATS = Verb("stats", "validate a prototype JSONL trace and count events per intent class", stats_arguments,
             lambda args: TraceStatsConfig(args.file), run, render.trace_stats, TraceStatsSummary)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="inspect KV intent traces")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    add(verbs, STATS)
