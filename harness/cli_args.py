"""The argparse pieces every command shares, core and tracks alike: the parser class with kvds's error contract,
`--json`, the numeric option types and the root check.

They live apart from harness/cli.py so that a track's cli imports these helpers, never the CLI that loads it.
"""

from __future__ import annotations

import argparse
import os
import sys

from harness.errors import NeedsRoot


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit status 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"kvds: error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")


def _number(text: str, cast: type, kind: str, valid, rule: str):
    """One argparse type for every numeric option: `kind` names what a non-number is not, `rule` what it must be."""
    try:
        v = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not valid(v):
        raise argparse.ArgumentTypeError(f"{text!r} must be {rule}")
    return v


def positive_int(text: str) -> int:
    return _number(text, int, "a whole number", lambda v: v > 0, "positive")


def positive_float(text: str) -> float:
    return _number(text, float, "a number", lambda v: 0 < v < float("inf"), "a positive finite number")


def nonneg_int(text: str) -> int:
    return _number(text, int, "an integer", lambda v: v >= 0, "zero or positive")


def nonneg_float(text: str) -> float:
    return _number(text, float, "a number", lambda v: 0 <= v < float("inf"), "zero or a positive finite number")


def percent(text: str) -> float:
    v = positive_float(text)
    if v >= 100:
        raise argparse.ArgumentTypeError(f"{text!r} must be below 100")
    return v


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise NeedsRoot(f"{what} needs root (it changes kernel state); run it as root")
