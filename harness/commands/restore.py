"""`kvds restore`: put back every kernel knob a crashed or killed kvds process left changed."""

from __future__ import annotations

import argparse

from harness.cli_args import require_root
from harness.commands import render
from harness.commands.restore_run import RestoreConfig, run
from harness.commands.summary import RestoreSummary
from harness.verbs import Verb, add


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include-live", action="store_true",
                   help="also restore journals of kvds processes that are still running (dangerous)")


def config(args: argparse.Namespace) -> RestoreConfig:
    require_root("kvds restore")
    return RestoreConfig(include_live=args.include_live)


VERB = Verb("restore", "replay journals left by killed kvds processes", arguments, config, run, render.restore,
            RestoreSummary, exit_status=lambda s: 1 if s.failed() else 0)


def register(sub: argparse._SubParsersAction) -> None:
    add(sub, VERB)
