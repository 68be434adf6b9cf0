"""Plain block sequences for the cross-check: a Mooncake-format JSONL trace's prefix-block hashes (every request's
`hash_ids` in arrival order, each hash one block), a kvds trace's accessed blocks in event order, or a seeded
generated sequence (no file needed)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import UserError

GENERATED = "generated"


@dataclass(frozen=True)
class BlockSequence:
    """Block ids in request order, and where they came from (for the summary's first line)."""
    blocks: np.ndarray   # int64
    source: str

    @property
    def unique(self) -> int:
        return int(np.unique(self.blocks).size)


def generated(n: int = 100_000, objects: int = 20_000, alpha: float = 0.9, seed: int = 0) -> BlockSequence:
    """Zipf(alpha) popularity over `objects` blocks, with runs of consecutive ids (a prefix chain read in order)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, objects + 1) ** alpha
    heads = rng.choice(objects, size=n // 4 + 1, p=weights / weights.sum())
    runs = rng.integers(1, 8, size=heads.size)
    blocks = np.concatenate([(h * 8 + np.arange(r)) for h, r in zip(heads.tolist(), runs.tolist())])[:n]
    return BlockSequence(rng.permutation(objects * 8)[blocks].astype(np.int64),
                         f"generated (Zipf {alpha:g} over {objects} chains, seed {seed})")


def mooncake(path: Path) -> BlockSequence:
    """Every request's `hash_ids` in arrival (`timestamp`, then file) order."""
    stamps: list[float] = []
    chains: list[list[int]] = []
    with path.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise UserError(f"{path}:{n}: not a JSON object") from None
            ids = row.get("hash_ids") if isinstance(row, dict) else None
            if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
                raise UserError(f"{path}:{n}: hash_ids must be a list of integers")
            ts = row.get("timestamp", 0)
            if not isinstance(ts, (int, float)) or isinstance(ts, bool):
                raise UserError(f"{path}:{n}: timestamp {ts!r} is not a number")
            stamps.append(float(ts))
            chains.append(ids)
    if not chains:
        raise UserError(f"{path}: no requests")
    order = np.argsort(np.asarray(stamps), kind="stable")
    blocks = [h for i in order.tolist() for h in chains[i]]
    if not blocks:
        raise UserError(f"{path}: no prefix blocks (every hash_ids is empty)")
    return BlockSequence(np.asarray(blocks, dtype=np.int64), f"{path.name} (prefix blocks, {len(chains)} requests)")


def kvds_trace(path: Path) -> BlockSequence:
    """The accessed blocks of a kvds .npz trace, in event order."""
    from kv_policy import codes
    from kv_policy.trace import load_npz

    t = load_npz(path)
    blocks = t.block[t.kind == codes.ACCESS].astype(np.int64)
    if not blocks.size:
        raise UserError(f"{path}: no accesses")
    return BlockSequence(blocks, f"{path.name} (accessed blocks)")


def load(path: str | None) -> BlockSequence:
    """The sequence `--trace` names: .npz is a kvds trace, anything else a Mooncake JSONL; None: generated."""
    if path is None:
        return generated()
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--trace {path}: no such file")
    return kvds_trace(p) if p.suffix == ".npz" else mooncake(p)
