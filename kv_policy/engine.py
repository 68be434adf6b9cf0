"""A continuous-batching serving engine emulator that turns requests into KV block events.

It models what a paged-attention engine does to its KV cache: prefill allocates blocks,
each decode step reads sink + sliding-window + heavy-hitter blocks, generated tokens
grow the cache, finished requests free it. The batch of each step is a uniform random
draw among active requests (never priority order), chosen one step ahead and announced
as intent hints: that look-ahead, and the shared documents of the first waiting requests (`queue_hints`: the
queue as it stands at the end of a step, documents retrieved at arrival), are the only future knowledge the hints
carry. Shared blocks are RAG documents or, for a serving trace with prefix hashes (serving_load.py), the hashed
prefix blocks: a prefix cache, since a shared block outlives its readers (cold-spillable once none is active) and a
later request naming it hits it or pays its load or recompute. A HINT's
`critical` flag says the block stays in its request's per-decode read set (sink or window: a
batch change), False when it slides out of the window (the sink/window layout the engine knows).
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from kv_policy import codes
from kv_policy.profiles import Profile
from kv_policy.trace import Trace


# Shared RAG document blocks belong to no single request: neutral priority and deadline.
DOC_PRIORITY = 50
DOC_TPOT_US = 100_000.0


@dataclass(frozen=True)
class RequestSpec:
    """One inference request as the engine sees it."""

    arrival_step: int
    prompt_tokens: int
    gen_tokens: int
    priority: int
    tpot_us: float
    docs: tuple[int, ...] = ()  # shared blocks of KV prepended to the prompt: RAG documents or hashed prefixes
    doc_tokens: tuple[int, ...] = ()  # tokens of each of `docs` (empty: the profile's rag_doc_tokens each)


@dataclass
class _Req:
    idx: int
    spec: RequestSpec
    blocks: list[int]             # doc blocks, then own prompt and generated blocks
    own_start: int                # index in `blocks` where the request's own blocks begin
    tokens: int                   # tokens currently in the cache (own only)
    generated: int = 0
    perm: list[int] = field(default_factory=list)  # heavy-hitter popularity order over block positions
    rate: list[float] = field(default_factory=list)  # per position: heavy-hitter draws per decode (Engine._rates)


class _Events:
    """Append-only event columns as typed arrays (a whole serving trace is ~80M events: Python lists of them held
    ~12 GB while generating; these hold 14 bytes an event) with cheap appends of repeated values."""

    def __init__(self) -> None:
        self.step = array("q")
        self.kind = array("B")
        self.block = array("i")
        self.critical = array("B")
        self.cls = array("B")

    def add(self, step: int, kind: int, blocks, critical: bool = False, cls: int = 0) -> None:
        n = len(blocks)
        self.step.extend(repeat(step, n))
        self.kind.extend(repeat(kind, n))
        self.block.extend(blocks)
        self.critical.extend(repeat(int(critical), n))
        self.cls.extend(repeat(cls, n))

    def __len__(self) -> int:
        return len(self.step)

    def column(self, name: str, dtype, n: int) -> np.ndarray:
        """The first `n` events of a column as a numpy array of its own (a copy: the buffer is released)."""
        return np.frombuffer(getattr(self, name), dtype=dtype, count=n).astype(dtype, copy=True)


class Engine:
    """Runs a list of requests through the batching model and records block events."""

    def __init__(self, profile: Profile, block_bytes: int, seed: int) -> None:
        self.p = profile
        self.block_bytes = block_bytes
        self.rng = np.random.default_rng(seed)
        self.ev = _Events()
        self.size: list[int] = []
        self.owner: list[int] = []
        self.prio: list[int] = []
        self.deadline: list[float] = []
        self.hh_rate: list[float] = []   # the attention model's heavy-hitter probability per decode (RateOracle)
        self.doc_blocks: dict[int, list[int]] = {}
        self.doc_refs: dict[int, int] = {}
        self.doc_queued: set[int] = set()  # documents announced prefetch-soon for a waiting request
        self._ubuf: list[float] = []
        self._upos = 0
        self._bbuf: list[int] = []
        self._bpos = 0

    def _new_blocks(self, n: int, req: int, prio: int, tpot: float) -> list[int]:
        first = len(self.size)
        self.size.extend([self.block_bytes] * n)
        self.owner.extend([req] * n)
        self.prio.extend([prio] * n)
        self.deadline.extend([tpot] * n)
        self.hh_rate.extend([0.0] * n)
        return list(range(first, first + n))

    def _hot_positions(self, r: _Req) -> tuple[list[int], list[int]]:
        """Block positions always read per step (sinks + window) and the heavy-hitter candidates."""
        n = len(r.blocks)
        p = self.p
        sinks = list(range(min(p.sink_blocks, n)))
        window = list(range(max(len(sinks), n - p.window_blocks), n))
        return sinks + window, [len(sinks), max(len(sinks), n - p.window_blocks)]

    def _admit(self, step: int, idx: int, spec: RequestSpec) -> _Req:
        p = self.p
        blocks: list[int] = []
        for k, d in enumerate(spec.docs):
            if d not in self.doc_blocks:
                tokens = spec.doc_tokens[k] if spec.doc_tokens else p.rag_doc_tokens
                n_doc = -(-tokens // p.block_tokens)
                self.doc_blocks[d] = self._new_blocks(n_doc, -1 - d, DOC_PRIORITY, DOC_TPOT_US)
                self.ev.add(step, codes.ALLOC, self.doc_blocks[d], cls=codes.WARM)
            elif self.doc_refs.get(d, 0) == 0 or d in self.doc_queued:
                self.ev.add(step, codes.HINT, self.doc_blocks[d], cls=codes.WARM)
            self.doc_queued.discard(d)
            self.doc_refs[d] = self.doc_refs.get(d, 0) + 1
            blocks.extend(self.doc_blocks[d])
        own = self._new_blocks(-(-spec.prompt_tokens // p.block_tokens), idx, spec.priority, spec.tpot_us)
        self.ev.add(step, codes.ALLOC, own, cls=codes.RECOMPUTE_OK)  # the prompt is known: prefill can redo it
        # Prefill attends to the shared documents and to the prompt's earlier chunks: reads no decode waits on.
        self.ev.add(step, codes.ACCESS, blocks + own, critical=False)
        max_blocks = len(blocks) + -(-(spec.prompt_tokens + spec.gen_tokens) // p.block_tokens)
        r = _Req(idx, spec, blocks + own, len(blocks), spec.prompt_tokens,
                 perm=self.rng.permutation(max_blocks).tolist())
        r.rate = self._rates(r.perm)
        for q, b in enumerate(r.blocks):
            if q < len(r.rate) and r.rate[q] > self.hh_rate[b]:  # a shared block: its most likely reader's
                self.hh_rate[b] = r.rate[q]
        return r

    def _rates(self, perm: list[int]) -> list[float]:
        """Per block position, the expected heavy-hitter draws landing on it per decode (capped at 1): a draw picks
        rank floor(n u^gamma), so rank k has probability ((k+1)/n)^(1/gamma) - (k/n)^(1/gamma); 2 x heavy_hitters
        draws are made. What the generator knows and no engine does: only the RateOracle reference reads it."""
        n, g = len(perm), 1.0 / self.p.hh_gamma
        cdf = (np.arange(n + 1) / max(n, 1)) ** g
        by_rank = np.minimum(1.0, 2 * self.p.heavy_hitters * np.diff(cdf))
        out = np.zeros(n)
        out[np.asarray(perm, dtype=np.int64)] = by_rank
        return out.tolist()

    def _uniform_pow(self, n: int) -> list[float]:
        """`n` draws of u**hh_gamma from a bulk buffer (per-call numpy overhead would dominate)."""
        if self._upos + n > len(self._ubuf):
            self._ubuf = (self.rng.random(1 << 16) ** self.p.hh_gamma).tolist()
            self._upos = 0
        out = self._ubuf[self._upos:self._upos + n]
        self._upos += n
        return out

    def _accepted(self) -> int:
        """Draft tokens accepted this step (binomial), from a bulk buffer."""
        if self._bpos >= len(self._bbuf):
            self._bbuf = self.rng.binomial(self.p.spec_draft, self.p.spec_accept, 1 << 14).tolist()
            self._bpos = 0
        self._bpos += 1
        return self._bbuf[self._bpos - 1]

    def _decode(self, step: int, r: _Req, out_active: dict[int, _Req]) -> None:
        p = self.p
        always, (mid_lo, mid_hi) = self._hot_positions(r)
        pos = set(always)
        if p.heavy_hitters and mid_hi > mid_lo:
            perm, n = r.perm, len(r.perm)
            got = 0
            for x in self._uniform_pow(p.heavy_hitters * 2):
                b = perm[int(n * x)]
                if mid_lo <= b < mid_hi:
                    pos.add(b)
                    got += 1
                    if got == p.heavy_hitters:
                        break
        blocks = r.blocks
        self.ev.add(step, codes.ACCESS, [blocks[i] for i in sorted(pos)], critical=True)
        new_tokens = 1 + (self._accepted() if p.spec_draft else 0)
        new_tokens = min(new_tokens, r.spec.gen_tokens - r.generated)
        before = -(-r.tokens // p.block_tokens)
        r.tokens += new_tokens
        r.generated += new_tokens
        grow = -(-r.tokens // p.block_tokens) - before
        if grow > 0:
            old_window = set(always)
            fresh = self._new_blocks(grow, r.idx, r.spec.priority, r.spec.tpot_us)
            for q, b in enumerate(fresh, start=len(blocks)):
                if q < len(r.rate):
                    self.hh_rate[b] = r.rate[q]
            blocks.extend(fresh)
            self.ev.add(step, codes.ALLOC, fresh, cls=codes.DECODE_CRITICAL)
            left = sorted(old_window - set(self._hot_positions(r)[0]))
            if left:
                self.ev.add(step, codes.HINT, [blocks[i] for i in left], cls=codes.WARM)
        if r.generated >= r.spec.gen_tokens:
            self._finish(step, r)
            del out_active[r.idx]

    def _finish(self, step: int, r: _Req) -> None:
        self.ev.add(step, codes.FREE, r.blocks[r.own_start:])
        for d in r.spec.docs:
            self.doc_refs[d] -= 1
            if self.doc_refs[d] == 0 and d not in self.doc_queued:  # a waiting request's document is not cold
                self.ev.add(step, codes.HINT, self.doc_blocks[d], cls=codes.COLD_SPILLABLE)

    def _hint_queue(self, step: int, head: list[RequestSpec]) -> None:
        """Announce the shared documents the first waiting requests will read when admitted (retrieved at their
        arrival, so the engine knows them): prefetch-soon, not decode-critical (the HINT's critical flag False)."""
        wanted = {d for spec in head for d in spec.docs if d in self.doc_blocks}
        for d in sorted(wanted - self.doc_queued):
            self.ev.add(step, codes.HINT, self.doc_blocks[d], cls=codes.PREFETCH_SOON)
        for d in sorted(self.doc_queued - wanted):  # (only admission takes a document off the queue's list)
            cold = self.doc_refs.get(d, 0) == 0
            self.ev.add(step, codes.HINT, self.doc_blocks[d], cls=codes.COLD_SPILLABLE if cold else codes.WARM)
        self.doc_queued = wanted

    def _hint_batch(self, step: int, active: dict[int, _Req], old: list[int], new: list[int]) -> None:
        """Announce the next step's batch: entering requests' hot blocks become prefetch-soon."""
        old_s, new_s = set(old), set(new)
        for i in new:
            if i not in old_s:
                r = active[i]
                self.ev.add(step, codes.HINT, [r.blocks[j] for j in self._hot_positions(r)[0]],
                            critical=True, cls=codes.PREFETCH_SOON)
        for i in old:
            if i not in new_s and i in active:
                r = active[i]
                self.ev.add(step, codes.HINT, [r.blocks[j] for j in self._hot_positions(r)[0]],
                            critical=True, cls=codes.WARM)

    def _draw_batch(self, active: dict[int, _Req]) -> list[int]:
        ids = list(active)
        k = min(self.p.batch, len(ids))
        return [ids[i] for i in self.rng.choice(len(ids), size=k, replace=False)] if k else []

    def run(self, specs: list[RequestSpec], max_events: int | None = None) -> Trace:
        """Execute all requests (or stop after `max_events`) and return the trace."""
        order = sorted(range(len(specs)), key=lambda i: (specs[i].arrival_step, i))
        pending = 0
        active: dict[int, _Req] = {}
        batch: list[int] = []
        step = 0
        while pending < len(order) or active:
            if not active and pending < len(order):
                step = max(step, specs[order[pending]].arrival_step)
            while pending < len(order) and specs[order[pending]].arrival_step <= step \
                    and len(active) < self.p.max_active:
                i = order[pending]
                active[i] = self._admit(step, i, specs[i])
                pending += 1
            batch = [i for i in batch if i in active] or self._draw_batch(active)
            for i in batch:
                self._decode(step, active[i], active)
            nxt = self._draw_batch(active)
            self._hint_batch(step, active, [i for i in batch if i in active], nxt)
            if self.p.queue_hints and self.doc_blocks:
                # the waiting queue as the engine knows it at the end of this step: requests arrived so far, FCFS
                head = [specs[i] for i in order[pending:pending + self.p.queue_hints]
                        if specs[i].arrival_step <= step]
                self._hint_queue(step, head)
            batch = nxt
            step += 1
            if max_events is not None and len(self.ev) >= max_events:
                break
        return self._trace(max_events)

    def _trace(self, max_events: int | None) -> Trace:
        n = len(self.ev) if max_events is None else min(max_events, len(self.ev))
        return Trace(
            step=self.ev.column("step", np.int64, n),
            kind=self.ev.column("kind", np.uint8, n),
            block=self.ev.column("block", np.int32, n),
            critical=self.ev.column("critical", np.uint8, n).view(bool),
            cls=self.ev.column("cls", np.uint8, n),
            block_size=np.asarray(self.size, dtype=np.int64),
            block_request=np.asarray(self.owner, dtype=np.int32),
            block_priority=np.asarray(self.prio, dtype=np.uint8),
            block_deadline_us=np.asarray(self.deadline, dtype=np.float64),
            block_hh_rate=np.asarray(self.hh_rate, dtype=np.float64),
        )
