"""Reader for the public prototype's KV intent trace (JSONL, one event per line).

Every field of an event's `intent` object is either mapped onto `KVBlock` or rejected with an error naming
file and line: a trace is never half-read with fields silently dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from harness.errors import UserError
from harness.intent import KVBlock, Phase

EVENT_TYPES = frozenset(
    {
        "ALLOCATED", "ACCESSED", "PREFETCHED", "SPILLED", "EVICTED", "RECOMPUTED", "FREED", "COMPLETED",
        "PROMOTED", "DEMOTED", "MARKED_DECODE_CRITICAL", "MARKED_COLD", "MARKED_WARM", "MARKED_HOT",
        "MARKED_DONE",
    }
)
EVENT_KEYS = {"step", "event_type", "intent", "reason", "latency_us"}
PRIORITY_LABELS = frozenset({"DECODE_CRITICAL", "HOT", "WARM", "COLD", "DONE"})

# intent field -> (KVBlock field, accepted JSON types, may be null)
_INT = (int,)
_NUM = (int, float)
_STR = (str,)
_BOOL = (bool,)
INTENT_FIELDS: dict[str, tuple[str, tuple[type, ...], bool]] = {
    "request_id": ("request_id", _STR, False),
    "block_id": ("block_id", _INT, False),
    "size_bytes": ("size_bytes", _INT, False),
    "phase": ("phase", _STR, False),
    "priority": ("priority", _STR, False),
    "request_priority": ("request_priority", _INT, False),
    "deadline_us": ("deadline_us", _INT, True),
    "slack_us": ("slack_us", _INT, True),
    "target_decode_step": ("target_decode_step", _INT, True),
    "expected_reuse_window_tokens": ("expected_reuse_window_tokens", _INT, True),
    "recompute_cost_us": ("recompute_cost_us", _INT, True),
    "spill_cost_us": ("spill_cost_us", _INT, True),
    "prefetch_ok": ("prefetch_ok", _BOOL, False),
    "compression_ok": ("compress_ok", _BOOL, False),
    "recompute_ok": ("recompute_ok", _BOOL, False),
    "pin_requested": ("pin_requested", _BOOL, False),
    "is_draft": ("is_draft", _BOOL, False),
    "is_committed": ("is_committed", _BOOL, False),
    "arrival_step": ("arrival_step", _INT, True),
    "created_step": ("created_step", _INT, True),
    "last_access_step": ("last_access_step", _INT, True),
    "recency_score": ("recency_score", _NUM, True),
    "current_tier": ("current_tier", _STR, True),
    "allowed_tiers": ("allowed_tiers", (list,), False),
    "object_id": ("object_id", _STR, True),
    "object_type": ("object_type", _STR, False),
}
REQUIRED = ("request_id", "block_id", "size_bytes", "phase")


@dataclass(frozen=True)
class TraceEvent:
    step: int
    event_type: str
    block: KVBlock
    reason: str
    latency_us: float | None
    line_no: int


def parse_intent(obj: Any, where: str) -> KVBlock:
    """Map one `intent` object onto a KVBlock, rejecting unknown, missing or mistyped fields."""
    if not isinstance(obj, dict):
        raise UserError(f"{where}: 'intent' must be an object")
    unknown = sorted(set(obj) - set(INTENT_FIELDS))
    if unknown:
        raise UserError(f"{where}: unknown intent field {unknown[0]!r}")
    for name in REQUIRED:
        if name not in obj:
            raise UserError(f"{where}: intent field {name!r} is missing")
    kwargs: dict[str, Any] = {}
    for name, value in obj.items():
        target, types, nullable = INTENT_FIELDS[name]
        if value is None:
            if not nullable:
                raise UserError(f"{where}: intent field {name!r} must not be null")
            kwargs[target] = None
            continue
        if isinstance(value, bool) and bool not in types:
            raise UserError(f"{where}: intent field {name!r} has a boolean, expected {types[0].__name__}")
        if not isinstance(value, types):
            raise UserError(f"{where}: intent field {name!r} has type {type(value).__name__}, expected {types[0].__name__}")
        kwargs[target] = value
    try:
        kwargs["phase"] = Phase(kwargs["phase"].lower())
    except ValueError:
        raise UserError(f"{where}: unknown phase {obj['phase']!r}") from None
    if "priority" in kwargs and kwargs["priority"].upper() not in PRIORITY_LABELS:
        raise UserError(f"{where}: unknown priority label {obj['priority']!r}")
    if kwargs["size_bytes"] <= 0:
        raise UserError(f"{where}: size_bytes must be positive")
    if kwargs["block_id"] < 0:
        raise UserError(f"{where}: block_id must not be negative")
    rp = kwargs.get("request_priority")
    if rp is not None and not 0 <= rp <= 100:
        raise UserError(f"{where}: request_priority {rp} is outside 0-100")
    tiers = kwargs.get("allowed_tiers", [])
    if not all(isinstance(t, str) for t in tiers):
        raise UserError(f"{where}: allowed_tiers must be a list of strings")
    kwargs["allowed_tiers"] = tuple(tiers)
    # A block may be spilled when it is not pinned and more than one tier is allowed for it.
    kwargs["spill_ok"] = not kwargs.get("pin_requested", False) and (len(tiers) != 1)
    return KVBlock(**kwargs)


def parse_event(line: str, where: str, line_no: int) -> TraceEvent:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{where}: an event must be a JSON object")
    unknown = sorted(set(obj) - EVENT_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown event key {unknown[0]!r}")
    for key in ("step", "event_type", "intent"):
        if key not in obj:
            raise UserError(f"{where}: event key {key!r} is missing")
    step = obj["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise UserError(f"{where}: step must be a non-negative integer")
    etype = obj["event_type"]
    if etype not in EVENT_TYPES:
        raise UserError(f"{where}: unknown event_type {etype!r}")
    latency = obj.get("latency_us")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float))):
        raise UserError(f"{where}: latency_us must be a number or null")
    reason = obj.get("reason") or ""
    if not isinstance(reason, str):
        raise UserError(f"{where}: reason must be a string")
    return TraceEvent(step, etype, parse_intent(obj["intent"], where), reason, latency, line_no)


def read_prototype_jsonl(path: str | Path) -> Iterator[TraceEvent]:
    """Yield the trace's events in file order; the first bad line raises UserError naming file:line."""
    p = Path(path)
    try:
        fh = p.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"trace file {str(p)!r} does not exist") from None
    except IsADirectoryError:
        raise UserError(f"trace path {str(p)!r} is a directory") from None
    except OSError as exc:
        raise UserError(f"cannot read trace {str(p)!r}: {exc.strerror}") from None
    with fh:
        n = 0
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            yield parse_event(line, f"{p}:{n}", n)
        if n == 0:
            raise UserError(f"trace file {str(p)!r} is empty")
