"""The in-memory trace: one numpy array per column, so a million events cost megabytes, not objects."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import atomic
from harness.errors import UserError
from kv_policy import codes


@dataclass
class Trace:
    """Events (`step`, `kind`, `block`, `critical`, `cls`) plus per-block attributes.

    `cls` is the intent class carried by ALLOC and HINT events (ignored elsewhere).
    Per-block arrays are indexed by the dense block id used in `block`.
    """

    step: np.ndarray          # int64, non-decreasing decode step
    kind: np.ndarray          # uint8, codes.ALLOC/ACCESS/HINT/FREE
    block: np.ndarray         # int32, dense block id
    critical: np.ndarray      # bool, ACCESS: a decode step waits for it; HINT: stays in the sink/window set
    cls: np.ndarray           # uint8, ALLOC/HINT only: intent class code
    block_size: np.ndarray    # int64 bytes per block
    block_request: np.ndarray  # int32 request index per block
    block_priority: np.ndarray  # uint8 request priority 0-100 per block
    block_deadline_us: np.ndarray  # float64 per-token deadline of the block's request
    meta: dict = field(default_factory=dict)
    # the generator's own heavy-hitter read probability per decode of each block (engine.py), for the RateOracle
    # reference only; never saved (.npz keeps the columns above), never read by an online policy
    block_hh_rate: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @property
    def n_blocks(self) -> int:
        return int(self.block_size.shape[0])

    def peak_live_bytes(self) -> int:
        """Largest total size of allocated, not yet freed blocks (what an unlimited fast tier would hold)."""
        sizes = self.block_size[self.block].astype(np.int64)
        delta = np.where(self.kind == codes.ALLOC, sizes, 0) - np.where(self.kind == codes.FREE, sizes, 0)
        if delta.size == 0:
            return 0
        return int(max(0, np.cumsum(delta).max()))

    def peak_referenced_bytes(self) -> int:
        """Largest total size of the blocks requests in flight reference: allocated, not freed, and not a shared block
        no admitted request reads (a prefix cache's cached content, hinted cold-spillable until a request names it
        again). On a serving trace the cache keeps every prefix block ever named, so its live bytes grow with the
        slice's length; these do not."""
        sizes = self.block_size[self.block].astype(np.int64)
        shared = self.block_request[self.block] < 0
        delta = np.where(self.kind == codes.ALLOC, sizes, 0) - np.where(self.kind == codes.FREE, sizes, 0)
        delta[shared] = 0
        idx = np.flatnonzero(shared & (self.kind != codes.ACCESS))
        on = bytearray(self.n_blocks)
        for j, k, b, c in zip(idx.tolist(), self.kind[idx].tolist(), self.block[idx].tolist(), self.cls[idx].tolist()):
            want = 0 if k == codes.FREE or (k == codes.HINT and c == codes.COLD_SPILLABLE) else 1
            if want != on[b]:
                on[b] = want
                delta[j] = sizes[j] if want else -sizes[j]
        return int(max(0, np.cumsum(delta).max())) if delta.size else 0

    def counts(self) -> dict[str, int]:
        """Event counts by kind, plus decode-critical accesses."""
        out = {name: int((self.kind == k).sum()) for k, name in enumerate(codes.KIND_NAMES)}
        out["critical_access"] = int(((self.kind == codes.ACCESS) & self.critical).sum())
        out["blocks"] = self.n_blocks
        out["steps"] = int(np.unique(self.step).size)
        return out

    def validate(self) -> None:
        """Reject structurally impossible traces (one line, naming the first bad event)."""
        n = len(self)
        for name in ("kind", "block", "critical", "cls"):
            if getattr(self, name).shape[0] != n:
                raise UserError(f"trace column {name!r} has {getattr(self, name).shape[0]} rows, expected {n}")
        if n and np.any(np.diff(self.step) < 0):
            i = int(np.argmax(np.diff(self.step) < 0)) + 1
            raise UserError(f"trace event {i}: step goes backwards")
        if n and (self.block.min() < 0 or self.block.max() >= self.n_blocks):
            raise UserError(f"trace references block ids outside 0..{self.n_blocks - 1}")
        if np.any(self.kind > codes.FREE):
            raise UserError(f"trace event {int(np.argmax(self.kind > codes.FREE))}: unknown kind")
        if np.any(self.block_size <= 0):
            raise UserError(f"trace block {int(np.argmax(self.block_size <= 0))}: size must be positive")


def save(trace: Trace, path: str | Path) -> Path:
    """Write a trace as compressed .npz (meta as JSON)."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
    if not path.parent.is_dir():
        raise UserError(f"cannot write trace {str(path)!r}: no directory {str(path.parent)!r}")
    try:
        _write(trace, path)
    except OSError as exc:
        raise UserError(f"cannot write trace {str(path)!r}: {exc.strerror or exc}") from None
    return path


def _write(trace: Trace, path: Path) -> None:
    """Whole or not at all: the archive is built in memory, then renamed into place (harness.atomic)."""
    buf = io.BytesIO()
    np.savez_compressed(
        buf, step=trace.step, kind=trace.kind, block=trace.block, critical=trace.critical, cls=trace.cls,
        block_size=trace.block_size, block_request=trace.block_request, block_priority=trace.block_priority,
        block_deadline_us=trace.block_deadline_us, meta=np.array(json.dumps(trace.meta)),
    )
    atomic.write_bytes(path, buf.getvalue())


def load_npz(path: str | Path) -> Trace:
    """Read a trace written by `save`."""
    try:
        with np.load(path, allow_pickle=False) as z:
            cols = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a kvds trace (.npz): {exc}") from None
    missing = {"step", "kind", "block", "critical", "cls", "block_size", "block_request",
               "block_priority", "block_deadline_us"} - set(cols)
    if missing:
        raise UserError(f"{path}: trace is missing columns {sorted(missing)}")
    meta = json.loads(str(cols.pop("meta"))) if "meta" in cols else {}
    trace = Trace(meta=meta, **cols)
    trace.validate()
    return trace
