"""`kvds trace stats`'s work: read a prototype JSONL trace, classify every event's block, and count."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.commands.summary import TraceStatsSummary
from harness.intent import IntentClass, classify
from harness.results import Filed
from harness.trace_format import read_prototype_jsonl


@dataclass(frozen=True)
class TraceStatsConfig:
    file: str  # the public prototype's JSONL format


def run(cfg: TraceStatsConfig) -> Filed[TraceStatsSummary]:
    events: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    blocks = set()
    requests = set()
    steps = 0
    n = 0
    for ev in read_prototype_jsonl(cfg.file):
        n += 1
        events[ev.event_type] += 1
        classes[classify(ev.block, ev.step).value] += 1
        blocks.add(ev.block.key())
        requests.add(ev.block.request_id)
        steps = max(steps, ev.step)
    return Filed(None, TraceStatsSummary(
        file=cfg.file, events=n, requests=len(requests), unique_blocks=len(blocks), last_step=steps,
        event_types=dict(events), intent_classes={c.value: classes.get(c.value, 0) for c in IntentClass}))
