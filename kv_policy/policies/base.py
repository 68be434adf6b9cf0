"""The policy interface: each policy turns what it knows about a block into a heap key.

The simulator keeps resident blocks in a min-heap of keys (lazy deletion), so every policy
costs O(log live blocks) per event. Smaller key = evicted first. A key is computed when
a block is allocated, accessed, or (for hint-aware policies) re-classified, and stays
fixed until the next such event: that is what keeps the cost n log n.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from kv_policy.trace import Trace


class Policy:
    """Base: LRU behaviour; subclasses override `key` and flags.

    Online policies learn only from the events seen so far (never the trace length or a later event);
    `reference` policies (offline bounds such as MIN) may read the whole trace.
    """

    name = "base"
    reference = False         # an offline bound, reported apart from the contenders
    uses_hints = False        # re-key blocks on HINT events
    prefetch_on_hint = False  # prefetch a spilled block when it is announced prefetch-soon
    predictive_prefetch = False
    observes_events = False   # receive every event through `on_event` before the simulator handles it
    free_target = 0.0         # background-spill toward this free fraction of the fast tier (0 = never)
    prefetch_lookahead = False  # nominate spilled blocks of the next batch at the end of each step
    step_keys = False         # some keys hold for one step only: `stale` names the blocks to re-key after it
    raises_keys = False       # a block about to be evicted may be worth more than its filed key (`raise_key`)

    def bind(self, trace: Trace) -> None:
        """Receive per-block attributes before a run (sizes, priorities, deadlines)."""

    def on_access(self, b: int, step: int) -> None:
        """Update per-block history on an access (default: none)."""

    def on_event(self, i: int, kind: int, b: int, step: int, critical: bool, cls: int) -> None:
        """Observe one event (only called when `observes_events`)."""

    def choose_recompute(self, b: int, read_us: float, write_us: float, recompute_us: float) -> bool:
        """Drop a recompute-ok victim instead of spilling it? (default: always spill)."""
        return False

    def on_evicted(self, b: int) -> None:
        """A block left the fast tier with a slow-tier copy (only called when `prefetch_lookahead`)."""

    def lookahead(self, step: int, loc: bytearray) -> Iterable[int]:
        """Spilled blocks worth reading before the next step, best first (only when `prefetch_lookahead`); the
        simulator stops taking them at the first it cannot prefetch, so an iterator may compute them lazily."""
        return []

    def raise_key(self, b: int) -> bool:
        """Is the next victim `b` worth more now than its filed key? Then the simulator files it again (`key`) and
        looks at the next one; the raised value must lapse through `stale` (only called when `raises_keys`)."""
        return False

    def stale(self) -> list[int]:
        """Blocks whose key lapsed with the step that just ended (only called when `step_keys`)."""
        return []

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return seq

    def event_keys(self, trace: Trace) -> "np.ndarray | None":
        """Per event, the key `key` files its block under, when that depends on the events alone (after `bind`):
        shape (events,), or (2, events) for a key of two parts compared in order. A policy that overrides this,
        whose `on_event` only feeds its keys, and that uses no prefetch, background spill, recompute choice,
        per-step or raised key, runs in the simulator's compiled loop (kv_policy/simulator_fast.py); the default
        (None) keeps the Python loop."""
        return None


# Keys that order by a category first use this stride: larger than any event index a trace can have,
# so no policy needs the trace's length (which an online policy cannot know).
STRIDE = float(1 << 40)
