"""The workload mix: which intent class each arena block belongs to, and the order blocks are re-accessed.

A mix is a share per class (`decode-critical=10,prefetch-soon=10,...`, percentages that must sum to 100).
Blocks get their class by a seeded shuffle, so the classes are interleaved through the arena the way a KV
cache's blocks are (requests arrive over time; each request's blocks end up in every class over its life),
and the kernel's LRU, which only sees addresses and access order, cannot tell the classes apart by position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import UserError
from harness.intent import IntentClass

CLASSES: tuple[IntentClass, ...] = tuple(IntentClass)
DEFAULT_MIX: dict[IntentClass, float] = {
    IntentClass.DECODE_CRITICAL: 10.0,
    IntentClass.PREFETCH_SOON: 10.0,
    IntentClass.WARM: 30.0,
    IntentClass.COLD_SPILLABLE: 30.0,
    IntentClass.RECOMPUTE_OK: 15.0,
    IntentClass.DONE: 5.0,
}
"""A mid-decode KV cache: a small hot set needed at the next step, a prefetch window, a warm reuse set, and
a long cold tail of finished-prefill / recomputable / completed requests (the shape of the prototype's
deadline_pressure trace, rounded)."""

DECODE_ORDER: tuple[IntentClass, ...] = CLASSES
"""Re-access order after pressure: the next decode step needs decode-critical blocks first, then the
prefetch window, then the warm set, then (if ever) the cold tail."""


def format_mix(mix: dict[IntentClass, float]) -> str:
    return ",".join(f"{c.value}={mix.get(c, 0):g}" for c in CLASSES)


def parse_mix(spec: str) -> dict[IntentClass, float]:
    """Parse `class=percent,...`; classes left out get 0; the shares must sum to 100."""
    out = {c: 0.0 for c in CLASSES}
    if not spec.strip():
        raise UserError("--mix is empty (expected e.g. decode-critical=10,warm=90)")
    for part in spec.split(","):
        name, sep, value = part.partition("=")
        if not sep:
            raise UserError(f"--mix entry {part!r} is not class=percent")
        cls = IntentClass.parse(name)
        try:
            v = float(value)
        except ValueError:
            raise UserError(f"--mix share {value!r} for {cls.value} is not a number") from None
        if not 0 <= v <= 100 or v != v:
            raise UserError(f"--mix share for {cls.value} must be between 0 and 100, not {value}")
        out[cls] = v
    total = sum(out.values())
    if abs(total - 100.0) > 1e-6:
        raise UserError(f"--mix shares sum to {total:g}, not 100")
    return out


@dataclass(frozen=True)
class Layout:
    """The arena's geometry and each block's class (index into CLASSES)."""

    block_bytes: int
    page_bytes: int
    block_class: np.ndarray  # shape (n_blocks,), uint8 index into CLASSES

    @property
    def n_blocks(self) -> int:
        return int(self.block_class.size)

    @property
    def pages_per_block(self) -> int:
        return self.block_bytes // self.page_bytes

    @property
    def n_pages(self) -> int:
        return self.n_blocks * self.pages_per_block

    @property
    def arena_bytes(self) -> int:
        return self.n_blocks * self.block_bytes

    def blocks_of(self, cls: IntentClass) -> np.ndarray:
        return np.flatnonzero(self.block_class == CLASSES.index(cls))

    def page_class(self) -> np.ndarray:
        """Class index of every page (pages of a block share its class)."""
        return np.repeat(self.block_class, self.pages_per_block)

    def class_pages(self) -> dict[IntentClass, int]:
        return {c: int(self.blocks_of(c).size) * self.pages_per_block for c in CLASSES}

    def decode_order(self) -> list[tuple[IntentClass, np.ndarray]]:
        """(class, its blocks in arena order) in DECODE_ORDER, skipping empty classes."""
        return [(c, self.blocks_of(c)) for c in DECODE_ORDER if self.blocks_of(c).size]


def make_layout(arena_bytes: int, block_bytes: int, page_bytes: int, mix: dict[IntentClass, float],
                seed: int = 0) -> Layout:
    """Blocks with classes in exact mix proportions (largest remainder), shuffled by seed."""
    if block_bytes % page_bytes:
        raise UserError(f"block size {block_bytes} is not a multiple of the page size {page_bytes}")
    n_blocks = arena_bytes // block_bytes
    if n_blocks < 1:
        raise UserError(f"arena of {arena_bytes} bytes holds no {block_bytes}-byte block")
    exact = np.array([mix.get(c, 0.0) for c in CLASSES]) * n_blocks / 100.0
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts))[: n_blocks - counts.sum()]:
        counts[i] += 1
    classes = np.repeat(np.arange(len(CLASSES), dtype=np.uint8), counts)
    np.random.default_rng(seed).shuffle(classes)
    return Layout(block_bytes, page_bytes, classes)
