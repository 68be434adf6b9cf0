"""`kvds doctor`: what this host can do, each capability found by trying it, with the reason.

Exit status 0 when every probe ran (whatever the host lacks); 1 when kvds itself failed while probing (status
"error": the traceback goes to stderr, the log of a CLI run); 2 for an unknown name or area.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from harness import doctor
from harness.capability import Capability
from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.errors import UserError

STYLE = {"available": "green", "unavailable": "red", "needs-root": "yellow", "error": "bold magenta"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="probe which kernel mechanisms work on this host")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these capabilities (default: all)")
    p.add_argument("--area", action="append", help="only these probe areas (repeatable)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _select(args: argparse.Namespace) -> list[Capability]:
    areas = doctor.probe_areas()
    for a in args.area or []:
        if a not in areas:
            raise UserError(f"unknown probe area {a!r} (areas: {', '.join(areas)})")
    if not args.names:
        return [c for a in (args.area or areas) for c in doctor.area_capabilities(a)]
    out = []
    for n in args.names:
        try:
            c = doctor.capability(n)
        except doctor.UnknownCapability:
            raise UserError(f"unknown capability {n!r} (kvds doctor --json lists every name)") from None
        if args.area and c.area not in args.area:
            raise UserError(f"capability {n!r} is in area {c.area!r}, not {', '.join(args.area)}")
        out.append(c)
    return out


def run(args: argparse.Namespace) -> int:
    caps = _select(args)
    errors = [c for c in caps if c.is_error]
    for c in errors:
        print(f"kvds doctor: kvds error probing {c.name}:\n{c.traceback}", file=sys.stderr)
    if args.json:
        emit(None, {"capabilities": [c.as_dict() for c in caps]}, True)
        return 1 if errors else 0
    table = Table(title="kvds doctor", show_lines=False)
    for col in ("area", "capability", "status", "reason"):
        table.add_column(col, overflow="fold")
    for c in caps:
        table.add_row(c.area, c.name, f"[{STYLE[c.status]}]{c.status}[/]", c.reason)
    Console(width=160).print(table)
    n_ok = sum(c.ok for c in caps)
    print(f"{n_ok} of {len(caps)} capabilities available"
          + (f"; {len(errors)} kvds error(s): {', '.join(c.name for c in errors)} (tracebacks on stderr)"
             if errors else ""))
    return 1 if errors else 0
