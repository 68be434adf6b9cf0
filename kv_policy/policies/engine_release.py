"""What the engine rows share: which blocks no running request references, and the order they were released in.

A serving engine's prefix cache keeps a finished request's blocks until it needs their room; only blocks with no
running request (reference count 0) are evictable, and each engine orders those its own way (vllm_prefix.py,
sglang_radix.py, sglang_priority.py, trtllm_retention.py). In a kvds trace the engine says a block has lost its
last reference with a hint to cold-spillable or done (engine.py hints a shared prefix cold when its last reader
finishes); a read, an allocation or any other hint means a running request holds it again.

Two-tier caveat: an engine never evicts a referenced block (it preempts a request instead), but kvds's fast tier
must make room for every allocation and miss, so every engine row evicts referenced blocks only after the last
unreferenced one, least recently used first. That fallback is kvds's, not the engine's.

Tail first: the engines free a finished request's chain tail first (vLLM) or only ever evict leaves (SGLang's radix
tree, TensorRT-LLM's free queues hold leaf blocks only), so of blocks released together the last of the chain goes
first. A run of consecutive release events (one request's finish) is one group; its members are ranked by their
place in the run, last first.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from kv_policy import codes
from kv_policy.policies.base import Policy
from kv_policy.trace import Trace

UNREFERENCED = (codes.COLD_SPILLABLE, codes.DONE)


class EngineRelease(Policy, ABC):
    """Tracks reference state, release groups and touch groups per block; subclasses order the released blocks."""

    uses_hints = True
    observes_events = True
    engine = ""              # the serving engine the row models (a real-system row, not an offline bound)

    def bind(self, trace: Trace) -> None:
        nb = trace.n_blocks
        self.priority = trace.block_priority.tolist()
        self.unref = bytearray(nb)          # 1 = no running request references the block
        self.release_group = [0] * nb       # first event index of the run of releases the block was released in
        self.release_rank = [0] * nb        # its place in that run
        self.touch_group = [0] * nb         # the same for the last read or release (SGLang's last_access_time)
        self.touch_rank = [0] * nb
        self._prev = (-2, -1)               # (event index, kind) of the last release or read event
        self.last_event = -1
        self._group = 0
        self._rank = 0

    def _run(self, i: int, kind: int) -> tuple[int, int]:
        """The group and rank of event `i` in the run of consecutive events of its kind."""
        if self._prev == (i - 1, kind):
            self._rank += 1
        else:
            self._group, self._rank = i, 0
        self._prev = (i, kind)
        return self._group, self._rank

    def on_event(self, i: int, kind: int, b: int, step: int, critical: bool, cls: int) -> None:
        self.last_event = i
        if kind == codes.HINT and cls in UNREFERENCED:
            g, r = self._run(i, kind)
            self.unref[b] = 1
            self.release_group[b] = self.touch_group[b] = g
            self.release_rank[b] = self.touch_rank[b] = r
            self.released(b, step)
        elif kind == codes.ACCESS:
            g, r = self._run(i, kind)
            self.unref[b] = 0
            self.touch_group[b], self.touch_rank[b] = g, r
            self.touched(b, step)
        elif kind != codes.FREE:  # an allocation or a hint to a live class: referenced
            self.unref[b] = 0
            if kind == codes.ALLOC:
                self.touched(b, step)

    def released(self, b: int, step: int) -> None:
        """The block lost its last reference (subclass hook)."""

    def touched(self, b: int, step: int) -> None:
        """A request read or allocated the block (subclass hook)."""

    @abstractmethod
    def released_key(self, b: int) -> tuple[float, ...]:
        """Order among unreferenced blocks (smaller = evicted first): each engine row defines its own."""

    def key(self, b: int, seq: int, step: int, cls: int) -> tuple[float, ...]:  # type: ignore[override]
        if self.unref[b]:
            return (0.0, *self.released_key(b))
        return (1.0, float(seq), 0.0, 0.0)
