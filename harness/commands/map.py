"""`kvds map`: the mapping from intent class to kernel mechanism, and whether this host has each one."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from harness import doctor
from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.intent import IntentClass
from harness.mapping import DEFAULT_MAPPING, available_mappings, load_mapping

COLUMNS = ("madvise", "damos_action", "memcg", "zswap", "read_ioprio", "write_ioprio", "uring_ioprio",
           "write_throttle_mbps", "spill_pacing", "mm_intent", "mm_intent_priority", "net_priority", "dscp",
           "pacing_mbps", "congestion")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("map", help="print the intent-class -> mechanism mapping")
    p.add_argument("--mapping", default=DEFAULT_MAPPING, help=f"mapping name or TOML path (default {DEFAULT_MAPPING})")
    p.add_argument("--list", action="store_true", help="list the named mappings")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        names = available_mappings()
        if args.json:
            emit(None, {"mappings": {n: load_mapping(n).description for n in names}}, True)
        else:
            for n in names:
                print(f"{n:15s} {load_mapping(n).description}")
        return 0
    m = load_mapping(args.mapping)
    caps = {name: doctor.capability(name) for name in m.capabilities()}
    if args.json:
        doc = m.as_dict()
        doc["capability_status"] = {k: c.as_dict() for k, c in caps.items()}
        emit(None, doc, True)
        return 0
    console = Console(width=180)
    table = Table(title=f"mapping {m.name}: {m.description}")
    table.add_column("class")
    rows = {cls: m.for_class(cls).as_dict() for cls in IntentClass}
    # only the mechanisms this mapping uses (every one for a mapping that uses none): 15 columns do not fit
    cols = [c for c in COLUMNS if any(c in d for d in rows.values())] or list(COLUMNS)
    for col in cols:
        table.add_column(col.replace("_", " "))
    for cls, d in rows.items():
        table.add_row(cls.value, *[", ".join(d[c]) if isinstance(d.get(c), list) else str(d.get(c, "-")) for c in cols])
    console.print(table)
    need = Table(title="capabilities this mapping needs (from kvds doctor)")
    for col in ("capability", "used by", "status", "reason"):
        need.add_column(col, overflow="fold")
    for name, classes in m.capabilities().items():
        c = caps[name]
        style = "green" if c.ok else ("yellow" if c.status == "needs-root" else "red")
        need.add_row(name, ", ".join(x.value for x in classes), f"[{style}]{c.status}[/]", c.reason)
    console.print(need)
    return 0
