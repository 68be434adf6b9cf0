"""`kvds doctor`: what this host can do, each capability found by trying it, with the reason."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from harness import doctor
from harness.cli import add_json_flag
from harness.errors import UserError

STYLE = {"available": "green", "unavailable": "red", "needs-root": "yellow"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="probe which kernel mechanisms work on this host")
    p.add_argument("--area", action="append", help="only these probe areas (repeatable)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    areas = doctor.probe_areas()
    for a in args.area or []:
        if a not in areas:
            raise UserError(f"unknown probe area {a!r} (areas: {', '.join(areas)})")
    caps = [c for a in (args.area or areas) for c in doctor.probe_area(a)]
    if args.json:
        print(json.dumps([c.as_dict() for c in caps], indent=2))
        return 0
    table = Table(title="kvds doctor", show_lines=False)
    for col in ("area", "capability", "status", "reason"):
        table.add_column(col, overflow="fold")
    for c in caps:
        table.add_row(c.area, c.name, f"[{STYLE[c.status]}]{c.status}[/]", c.reason)
    Console(width=160).print(table)
    n_ok = sum(c.ok for c in caps)
    print(f"{n_ok} of {len(caps)} capabilities available")
    return 0
