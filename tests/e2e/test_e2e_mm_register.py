"""The intent cells' mm_intent registration follows the class map by deltas: a step whose changed slots held no
intent registers only their new ranges (never the whole map again), while a step that takes a registered slot's
intent back clears the process's intents and registers the map again (the series removes intents only per process).
The registry here is a directory with the series' file names (what register and clear receive is not parsed)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.intent import IntentClass
from harness.mapping import load_mapping
from qemu_validation import mm_intent_client as mic
from e2e.intents import CLASS_CODES
from e2e.mm_register import NONE, Registration, runs

CRIT, WARM, COLD = (CLASS_CODES[c] for c in (IntentClass.DECODE_CRITICAL, IntentClass.WARM,
                                               IntentClass.COLD_SPILLABLE))
SLOT = 4 * mic.PAGE_SIZE


def _registration(tmp_path: Path, slots: int = 64) -> Registration:
    for name in ("register", "clear", "dump"):
        (tmp_path / name).write_text("")
    return Registration(load_mapping("stack"), 0x7F0000000000, SLOT, slots, mic.Registry(tmp_path))


def test_runs_are_maximal_neighbouring_slots_of_one_code() -> None:
    codes = np.array([1, 1, 2, 2, 2, 1, 1, 1], dtype=np.uint8)
    mask = np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=bool)
    assert runs(codes, mask) == [(0, 2, 1), (2, 1, 2), (4, 1, 2), (5, 3, 1)]
    assert runs(codes, np.zeros(8, dtype=bool)) == []


def test_new_intents_are_registered_as_a_delta(tmp_path: Path) -> None:
    reg = _registration(tmp_path)
    reg.apply(np.arange(0, 10), np.full(10, CRIT, dtype=np.uint8))   # one range
    assert (reg.updates, reg.full, reg.writes, reg.entries) == (1, 0, 1, 1)
    reg.apply(np.arange(20, 30), np.full(10, COLD, dtype=np.uint8))  # slots that held nothing: only their range
    reg.apply(np.array([40, 42]), np.full(2, CRIT, dtype=np.uint8))  # two more ranges, not the map again
    assert (reg.updates, reg.full, reg.writes, reg.entries) == (3, 0, 4, 4)
    held = np.full(64, NONE, dtype=np.uint8)
    held[0:10] = CRIT
    held[20:30] = COLD
    held[[40, 42]] = CRIT
    assert (reg.held == held).all()
    reg.apply(np.array([50]), np.array([WARM], dtype=np.uint8))      # an unregistered class: nothing to write
    assert (reg.updates, reg.writes) == (3, 4)


def test_taking_an_intent_back_re_registers_the_map(tmp_path: Path) -> None:
    reg = _registration(tmp_path)
    reg.apply(np.arange(0, 10), np.full(10, CRIT, dtype=np.uint8))
    reg.apply(np.arange(20, 30), np.full(10, COLD, dtype=np.uint8))
    reg.apply(np.array([5]), np.array([WARM], dtype=np.uint8))       # a registered slot turns warm: clear + map
    assert (reg.updates, reg.full) == (3, 1)
    assert reg.writes == 2 + 3 and reg.entries == 3                  # 0-4, 6-9, 20-29
    assert reg.held[5] == NONE and (reg.held[[0, 4, 6, 9]] == CRIT).all()
    out = reg.close()
    assert out["updates"] == 3 and out["full_updates"] == 1 and out["writes"] == 5 and out["error"] is None
