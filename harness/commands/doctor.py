"""`kvds doctor`: what this host can do, each capability found by trying it, with the reason.

Exit status 0 when every probe ran (whatever the host lacks); 1 when kvds itself failed while probing (status
"error": the traceback goes to stderr, the log of a CLI run); 2 for an unknown name or area.
"""

from __future__ import annotations

import argparse

from harness import doctor
from harness.capability import Capability
from harness.commands import render
from harness.commands.doctor_run import DoctorConfig, run
from harness.commands.summary import DoctorSummary
from harness.errors import UserError
from harness.verbs import Verb, add


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="NAME", help="only these capabilities (default: all)")
    p.add_argument("--area", action="append", help="only these probe areas (repeatable)")


def config(args: argparse.Namespace) -> DoctorConfig:
    return DoctorConfig(tuple(_select(args)))


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


VERB = Verb("doctor", "probe which kernel mechanisms work on this host", arguments, config, run, render.doctor,
            DoctorSummary, exit_status=lambda s: 1 if s.errors() else 0)


def register(sub: argparse._SubParsersAction) -> None:
    add(sub, VERB)
