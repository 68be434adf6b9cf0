"""Compact integer codes for event kinds and intent classes.

Traces are numpy arrays, so classes travel as small integers; the names match
`harness.intent.IntentClass` values so results stay readable.
"""
from __future__ import annotations

from harness.intent import IntentClass

# Event kinds in a Trace.
ALLOC = 0   # a KV block is produced (prefill or decode growth) in the fast tier
ACCESS = 1  # a KV block is read; `critical` says whether a decode step waits on it
HINT = 2    # the serving engine announces a new intent class for a block
FREE = 3    # the block's request finished (or the block was discarded)

KIND_NAMES = ("alloc", "access", "hint", "free")

# Intent classes, ordered from "keep most" to "keep least".
DECODE_CRITICAL = 0
PREFETCH_SOON = 1
WARM = 2
COLD_SPILLABLE = 3
RECOMPUTE_OK = 4
DONE = 5

CLASS_NAMES = tuple(c.value for c in IntentClass)  # the codes above are these names' positions
CLASS_BY_NAME = {name: code for code, name in enumerate(CLASS_NAMES)}

# Tier locations of a block in the simulator.
LOC_NONE = 0
LOC_FAST = 1
LOC_SLOW = 2
