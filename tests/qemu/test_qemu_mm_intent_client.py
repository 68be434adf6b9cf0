"""The user-space mm_intent helper: checked entries, dump parsing, and arena coalescing by intent class."""

from __future__ import annotations

import pytest

from harness.errors import UserError
from harness.intent import KVBlock, Phase
from qemu_validation import mm_intent_client as mic

P = mic.PAGE_SIZE


def test_entry_line_round_trips_through_dump_parser() -> None:
    e = mic.entry(42, 0x7F0000000000, 4 * P, mic.LATENCY_CRITICAL | mic.PREFETCHABLE, 2**64 - 1, 255)
    assert e.line() == f"42 0x7f0000000000 {4 * P:#x} 0x5 18446744073709551615 255\n"
    assert mic.parse_dump(e.line()) == [e]


@pytest.mark.parametrize("kw", [dict(pid=0), dict(start=1), dict(length=0), dict(length=P + 1), dict(flags=0x20),
                                dict(priority=256), dict(deadline_ns=-1)])
def test_entry_rejects_what_the_kernel_rejects(kw: dict) -> None:
    args = dict(pid=1, start=P, length=P, flags=1, deadline_ns=0, priority=0) | kw
    with pytest.raises(UserError):
        mic.entry(**args)


def test_parse_dump_rejects_malformed() -> None:
    with pytest.raises(ValueError, match="line 2"):
        mic.parse_dump("1 0x1000 0x1000 0x1 0 0\n1 4096 4096 1 0 0\n")


def _block(i: int, phase: Phase, **kw) -> KVBlock:
    return KVBlock(request_id="r", block_id=i, size_bytes=P, phase=phase, **kw)


def test_arena_coalesces_equal_neighbours() -> None:
    blocks = [_block(0, Phase.DECODE, slack_us=10, deadline_us=5, request_priority=80),
              _block(1, Phase.DECODE, slack_us=20, deadline_us=5, request_priority=80),
              _block(2, Phase.PREFILL, spill_ok=True, priority="COLD", deadline_us=5, request_priority=80),
              _block(3, Phase.DONE, request_priority=300)]
    got = mic.arena_entries(7, 0x10000000, P, blocks)
    assert [(e.start, e.length, e.flags) for e in got] == [
        (0x10000000, 2 * P, mic.LATENCY_CRITICAL),
        (0x10000000 + 2 * P, P, mic.RECLAIMABLE),
        (0x10000000 + 3 * P, P, mic.BACKGROUND | mic.RECLAIMABLE)]
    assert got[0].deadline_ns == 5000 and got[2].priority == 255


def test_arena_rejects_unaligned_blocks() -> None:
    with pytest.raises(UserError):
        mic.arena_entries(7, 0, P + 512, [])


def test_every_class_has_valid_flags() -> None:
    assert all(f & ~mic.VALID_FLAGS == 0 for f in mic.CLASS_FLAGS.values())
