"""The intent model: classification rules and the prototype trace reader."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.errors import UserError
from harness.intent import IntentClass, KVBlock, Phase, classify
from harness.trace_format import INTENT_FIELDS, read_prototype_jsonl
from tests.conftest import SEED_TRACE

BASE = KVBlock(request_id="r", block_id=0, size_bytes=65536, phase=Phase.DECODE, priority="COLD",
               slack_us=5000, target_decode_step=50, expected_reuse_window_tokens=500,
               recompute_cost_us=5000, spill_cost_us=200, allowed_tiers=("HBM", "DRAM"))


@pytest.mark.parametrize(
    "changes, step, expected",
    [
        ({"phase": Phase.DONE}, None, IntentClass.DONE),
        ({"slack_us": 1000}, None, IntentClass.DECODE_CRITICAL),
        ({"slack_us": 1001}, None, IntentClass.COLD_SPILLABLE),
        ({}, 49, IntentClass.DECODE_CRITICAL),
        ({}, 50, IntentClass.DECODE_CRITICAL),
        ({}, 51, IntentClass.COLD_SPILLABLE),
        ({"phase": Phase.PREFILL, "slack_us": 10}, None, IntentClass.COLD_SPILLABLE),
        ({"priority": "DECODE_CRITICAL"}, None, IntentClass.DECODE_CRITICAL),
        ({"recompute_ok": True, "recompute_cost_us": 80}, None, IntentClass.RECOMPUTE_OK),
        ({"recompute_ok": True, "recompute_cost_us": 6000}, None, IntentClass.COLD_SPILLABLE),
        ({"is_draft": True}, None, IntentClass.RECOMPUTE_OK),
        ({}, 45, IntentClass.PREFETCH_SOON),
        ({"prefetch_ok": False}, 45, IntentClass.COLD_SPILLABLE),
        ({"priority": "WARM"}, None, IntentClass.WARM),
        ({"expected_reuse_window_tokens": 64}, None, IntentClass.WARM),
        ({"spill_ok": False}, None, IntentClass.WARM),
    ],
)
def test_classify_rules(changes: dict, step: int | None, expected: IntentClass) -> None:
    assert classify(replace(BASE, **changes), step) is expected


def test_intent_class_parse() -> None:
    assert IntentClass.parse("DECODE_CRITICAL") is IntentClass.DECODE_CRITICAL
    with pytest.raises(UserError, match="unknown intent class"):
        IntentClass.parse("lukewarm")


def test_seed_trace_reads_every_field() -> None:
    events = list(read_prototype_jsonl(SEED_TRACE))
    assert len(events) == 463  # the sample: tests/data/README.md
    raw = json.loads(SEED_TRACE.open().readline())
    assert set(raw["intent"]) == set(INTENT_FIELDS)  # all 26 fields are mapped
    first = events[0].block
    assert (first.request_id, first.block_id, first.size_bytes, first.phase) == ("req-000", 0, 65536, Phase.PREFILL)
    assert first.compress_ok is True and first.allowed_tiers == ("DRAM", "HBM")
    assert {e.event_type for e in events} >= {"ALLOCATED", "ACCESSED", "MARKED_COLD"}


def _line(**intent_changes) -> str:
    intent = {"request_id": "r", "block_id": 1, "size_bytes": 4096, "phase": "DECODE"}
    intent.update(intent_changes)
    intent = {k: v for k, v in intent.items() if v != "DROP"}
    return json.dumps({"step": 0, "event_type": "ACCESSED", "intent": intent})


@pytest.mark.parametrize(
    "intent, message",
    [
        ({"bogus": 1}, "unknown intent field 'bogus'"),
        ({"block_id": "one"}, "'block_id' has type str"),
        ({"block_id": True}, "'block_id' has a boolean"),
        ({"phase": "SLEEPING"}, "unknown phase"),
        ({"request_priority": 101}, "outside 0-100"),
        ({"size_bytes": 0}, "size_bytes must be positive"),
        ({"request_id": None}, "must not be null"),
        ({"phase": "DROP"}, "'phase' is missing"),
        ({"priority": "LUKEWARM"}, "unknown priority label"),
        ({"allowed_tiers": [1]}, "allowed_tiers must be a list of strings"),
    ],
)
def test_bad_intent_fields_name_the_line(tmp_path, intent: dict, message: str) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(_line() + "\n" + _line(**intent) + "\n")
    with pytest.raises(UserError, match=message) as exc:
        list(read_prototype_jsonl(p))
    assert f"{p}:2:" in str(exc.value)


def test_the_simulator_codes_are_the_intent_classes_in_order() -> None:
    """The policy simulator's integer class codes (kv_policy/codes.py) are positions in IntentClass: one
    definition of the classes, whichever the code reads."""
    from kv_policy import codes

    assert codes.CLASS_NAMES == tuple(c.value for c in IntentClass)
    assert [getattr(codes, c.name) for c in IntentClass] == list(range(len(IntentClass)))
