"""`kvds restore`: put back every kernel knob a crashed or killed kvds process left changed."""

from __future__ import annotations

import argparse

from harness import journal
from harness.cli_args import add_json_flag, require_root
from harness.emit import emit


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("restore", help="replay journals left by killed kvds processes")
    p.add_argument("--include-live", action="store_true",
                   help="also restore journals of kvds processes that are still running (dangerous)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    require_root("kvds restore")
    reports = journal.restore_orphans(include_live=args.include_live)
    failed = any(r.failed for r in reports)
    if args.json:
        emit(None, {"journals": [{"journal": str(r.journal), "undone": r.undone, "failed": r.failed} for r in reports]},
             True)
    else:
        if not reports:
            print("nothing to restore: no journals left by dead kvds processes")
        for r in reports:
            print(f"{r.journal}: {len(r.undone)} change(s) undone, {len(r.failed)} failed")
            for u in r.undone:
                print(f"  restored {u}")
            for f in r.failed:
                print(f"  FAILED {f}")
    return 1 if failed else 0
