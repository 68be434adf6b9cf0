"""`kvds map`: the mapping from intent class to kernel mechanism, and whether this host has each one."""

from __future__ import annotations

import argparse

from harness.commands import render
from harness.commands.map_run import MapConfig, run
from harness.commands.summary import MapSummary
from harness.mapping import DEFAULT_MAPPING
from harness.verbs import Verb, add


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mapping", default=DEFAULT_MAPPING, help=f"mapping name or TOML path (default {DEFAULT_MAPPING})")
    p.add_argument("--list", action="store_true", help="list the named mappings")


def config(args: argparse.Namespace) -> MapConfig:
    return MapConfig(args.mapping, list_all=args.list)


VERB = Verb("map", "print the intent-class -> mechanism mapping", arguments, config, run, render.map, MapSummary)


def register(sub: argparse._SubParsersAction) -> None:
    add(sub, VERB)
