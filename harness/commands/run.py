"""`kvds run`: the main job. Doctor, the I/O bench (with eBPF histograms), the VM bench, the QEMU validate,
the policy comparison and its real-kernel replay, then the report — each stage a real kvds command
(harness/commands/run_run.py lists them).

A stage whose mechanism this host lacks (by `kvds doctor`) is skipped with the doctor's reason; every other stage
that did not run is a failure (harness/suite.py says which), and the suite then exits 1. Skipped and failed
stages are listed with their reasons at the end.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli_args import require_root
from harness.commands import render
from harness.commands.run_run import RunConfig, run, stages
from harness.commands.summary import RunSummary
from harness.errors import UserError
from harness.verbs import Verb, add


def arguments(p: argparse.ArgumentParser) -> None:
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (the default; `make demo`)")
    size.add_argument("--full", action="store_true", help="full sizes and more repetitions")
    p.add_argument("--skip", action="append", default=[], metavar="STAGE",
                   help="skip a stage (repeatable; comma lists allowed)")


def config(args: argparse.Namespace) -> RunConfig:
    require_root("kvds run")
    return RunConfig(quick=not args.full, skip=frozenset(_skips(args, [s.name for s in stages(Path("."))])))


def _skips(args: argparse.Namespace, names: list[str]) -> set[str]:
    out: set[str] = set()
    for item in args.skip:
        for name in filter(None, (x.strip() for x in item.split(","))):
            if name not in names and name != "report":
                raise UserError(f"unknown stage {name!r} for --skip (stages: {', '.join(names)}, report)")
            out.add(name)
    return out


VERB = Verb("run", "the main job: every track on this host, then the report", arguments, config, run, render.run,
            RunSummary, results_line=False, exit_status=lambda s: 1 if s.failed() else 0)


def register(sub: argparse._SubParsersAction) -> None:
    add(sub, VERB)
