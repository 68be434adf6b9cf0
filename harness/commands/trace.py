"""`kvds trace stats FILE`: read a KV intent trace, classify every event's block, and count.

A quick check that a trace is well-formed (every field mapped or rejected with file:line) and of what the
intent classifier makes of it, before a simulator or replay spends minutes on it.
"""

from __future__ import annotations

import argparse
from collections import Counter

from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.intent import IntentClass, classify
from harness.trace_format import read_prototype_jsonl


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="inspect KV intent traces")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    st = verbs.add_parser("stats", help="validate a prototype JSONL trace and count events per intent class")
    st.add_argument("file", help="trace file (the public prototype's JSONL format)")
    add_json_flag(st)
    st.set_defaults(func=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    events = Counter()
    classes = Counter()
    blocks = set()
    requests = set()
    steps = 0
    n = 0
    for ev in read_prototype_jsonl(args.file):
        n += 1
        events[ev.event_type] += 1
        classes[classify(ev.block, ev.step).value] += 1
        blocks.add(ev.block.key())
        requests.add(ev.block.request_id)
        steps = max(steps, ev.step)
    doc = {
        "file": args.file, "events": n, "requests": len(requests), "unique_blocks": len(blocks),
        "last_step": steps, "event_types": dict(events),
        "intent_classes": {c.value: classes.get(c.value, 0) for c in IntentClass},
    }
    if args.json:
        emit(None, doc, True)
        return 0
    print(f"{args.file}: {n} events, {len(requests)} requests, {len(blocks)} unique blocks, steps 0-{steps}")
    print("event types:    " + ", ".join(f"{k}={v}" for k, v in sorted(events.items())))
    print("intent classes: " + ", ".join(f"{c.value}={classes.get(c.value, 0)}" for c in IntentClass))
    return 0
