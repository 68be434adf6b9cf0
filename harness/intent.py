"""The KV intent model: what a KV block is, and which intent class it falls into.

A KV block is request state with a deadline, not anonymous memory. `classify` is the single place that
turns a block's observable facts (phase, slack, reuse window, recompute cost, flags) into one of six intent
classes; every track maps classes onto kernel mechanisms through `harness.mapping`, never from raw fields.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class IntentClass(str, enum.Enum):
    """Ordered from most to least latency-sensitive."""

    DECODE_CRITICAL = "decode-critical"
    PREFETCH_SOON = "prefetch-soon"
    WARM = "warm"
    COLD_SPILLABLE = "cold-spillable"
    RECOMPUTE_OK = "recompute-ok"
    DONE = "done"

    @classmethod
    def parse(cls, text: str) -> "IntentClass":
        from harness.errors import UserError

        norm = text.strip().lower().replace("_", "-")
        for c in cls:
            if c.value == norm:
                return c
        raise UserError(f"unknown intent class {text!r} (expected one of: {', '.join(c.value for c in cls)})")


class Phase(str, enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"
    VERIFY = "verify"
    DONE = "done"
    IDLE = "idle"


# Thresholds of the classifier; documented in harness/README.md and overridable per call.
CRITICAL_SLACK_US = 1_000
"""A decode or verify block with at most this much slack before its deadline must not miss."""
PREFETCH_WINDOW_STEPS = 8
"""A block needed within this many decode steps is worth prefetching now."""
WARM_REUSE_TOKENS = 64
"""A block expected to be reused within this many tokens stays warm."""


@dataclass(frozen=True)
class KVBlock:
    """One KV-cache block and what is known about its future use.

    Times are microseconds, steps are decode steps; None means "not known". The field names follow the
    public prototype's `intent` objects where they exist, so its traces load without renaming.
    """

    request_id: str
    block_id: int
    size_bytes: int
    phase: Phase
    priority: str = "WARM"
    request_priority: int = 50
    deadline_us: int | None = None
    slack_us: int | None = None
    target_decode_step: int | None = None
    expected_reuse_window_tokens: int | None = None
    recompute_cost_us: int | None = None
    spill_cost_us: int | None = None
    spill_ok: bool = True
    prefetch_ok: bool = True
    compress_ok: bool = True
    recompute_ok: bool = False
    pin_requested: bool = False
    is_draft: bool = False
    is_committed: bool = False
    arrival_step: int | None = None
    created_step: int | None = None
    last_access_step: int | None = None
    recency_score: float | None = None
    current_tier: str | None = None
    allowed_tiers: tuple[str, ...] = field(default_factory=tuple)
    object_id: str | None = None
    object_type: str = "KV_CACHE"

    def key(self) -> tuple[str, int]:
        return (self.request_id, self.block_id)


def classify(
    block: KVBlock,
    current_step: int | None = None,
    *,
    critical_slack_us: int = CRITICAL_SLACK_US,
    prefetch_window_steps: int = PREFETCH_WINDOW_STEPS,
    warm_reuse_tokens: int = WARM_REUSE_TOKENS,
) -> IntentClass:
    """Return the block's intent class.

    Rules, first match wins:
      1. phase done -> DONE.
      2. decode/verify phase and (slack <= critical_slack_us, or the block is needed at the current or next
         step, or the producer labelled it DECODE_CRITICAL) -> DECODE_CRITICAL.
      3. recompute allowed and recomputing costs no more than restoring from a spill, or a speculative draft
         block -> RECOMPUTE_OK (dropping it is nearly free).
      4. prefetch allowed and needed within prefetch_window_steps (or labelled HOT) -> PREFETCH_SOON.
      5. labelled HOT/WARM, reuse expected within warm_reuse_tokens, or pinned, or not spillable -> WARM.
      6. otherwise COLD_SPILLABLE.
    """
    if block.phase is Phase.DONE:
        return IntentClass.DONE
    steps_ahead = None
    if current_step is not None and block.target_decode_step is not None:
        steps_ahead = block.target_decode_step - current_step
    label = block.priority.upper()
    if block.phase in (Phase.DECODE, Phase.VERIFY):
        if label == "DECODE_CRITICAL":
            return IntentClass.DECODE_CRITICAL
        if block.slack_us is not None and block.slack_us <= critical_slack_us:
            return IntentClass.DECODE_CRITICAL
        if steps_ahead is not None and 0 <= steps_ahead <= 1:
            return IntentClass.DECODE_CRITICAL
    if block.is_draft and not block.is_committed:
        return IntentClass.RECOMPUTE_OK
    if block.recompute_ok and not block.pin_requested:
        restore = block.spill_cost_us
        if block.recompute_cost_us is not None and restore is not None and block.recompute_cost_us <= restore:
            return IntentClass.RECOMPUTE_OK
    if block.prefetch_ok:
        if label == "HOT" or (steps_ahead is not None and 0 <= steps_ahead <= prefetch_window_steps):
            return IntentClass.PREFETCH_SOON
    if label in ("HOT", "WARM") or block.pin_requested or not block.spill_ok:
        return IntentClass.WARM
    if block.expected_reuse_window_tokens is not None and block.expected_reuse_window_tokens <= warm_reuse_tokens:
        return IntentClass.WARM
    return IntentClass.COLD_SPILLABLE
