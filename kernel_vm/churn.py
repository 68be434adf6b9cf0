"""The churn workload of `kvds vm churn`: a decode loop whose blocks change class every step, and what each
mechanism must write to keep the kernel's view current.

R requests own the arena's blocks (`contiguous`: each request one run of blocks, as a per-sequence allocator gives;
`paged`: blocks dealt out by a seeded shuffle, as a paged KV cache's free list gives after some churn). A
round-robin scheduler runs batches of B requests: at step t the requests of batch t mod (R/B) decode
(decode-critical), the next batch's are prefetch-soon, all others cold. A request lives `lifetime` steps (starts
staggered, so about R/lifetime requests finish per step); a finished request's blocks go to a new one with a new
deadline (its admission + lifetime steps) and priority.

What keeping each mechanism current costs per step (the calls are made for real, kernel_vm/churn_run.py):
- madvise: MADV_WILLNEED on the blocks of requests that became decode-critical or prefetch-soon, MADV_COLD on those
  that became cold: one call per run of neighbouring blocks with the same change.
- mlock: mlock(2) on the blocks that became hot, munlock(2) on those that became cold.
- mm-intent: the registration carries the request's deadline and priority, which do not change while the request
  lives, so a step writes nothing unless a request finished; then, since the debugfs interface removes intents
  only per process, `clear <pid>` and one register line per range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import UserError
from harness.mapping import MADVISE_ADVICE
from kernel_vm.arena import MLOCK, MUNLOCK, block_runs
from qemu_validation import mm_intent_client as mic

LAYOUTS = ("contiguous", "paged")
CRITICAL, PREFETCH, COLD = 0, 1, 2
PRIORITIES = (255, 192, 128, 64)


@dataclass(frozen=True)
class Workload:
    n_blocks: int
    block_bytes: int
    requests: int
    batch: int
    steps: int
    lifetime: int           # decode steps a request lives
    layout: str = "contiguous"
    seed: int = 0

    def check(self) -> None:
        """UserError (exit 2) for a workload that cannot be laid out."""
        if self.layout not in LAYOUTS:
            raise UserError(f"--layout must be one of {', '.join(LAYOUTS)}, not {self.layout!r}")
        if not 0 < self.batch <= self.requests <= self.n_blocks:
            raise UserError(f"need 0 < --batch ({self.batch}) <= --requests ({self.requests}) <= blocks "
                            f"({self.n_blocks})")
        if self.requests % self.batch:
            raise UserError(f"--requests {self.requests} is not a whole number of batches of {self.batch}")
        if self.n_blocks % self.requests:
            raise UserError(f"{self.n_blocks} blocks do not split evenly over {self.requests} requests")

    @property
    def n_batches(self) -> int:
        return self.requests // self.batch

    def owners(self) -> np.ndarray:
        """Block -> the request slot owning it."""
        per = self.n_blocks // self.requests
        own = np.repeat(np.arange(self.requests), per)
        if self.layout == "paged":
            own = np.random.default_rng(self.seed).permutation(own)
        return own

    def slot_classes(self, t: int) -> np.ndarray:
        """Per request slot at step t: CRITICAL (decodes now), PREFETCH (decodes next step) or COLD."""
        batch_of = np.arange(self.requests) // self.batch
        out = np.full(self.requests, COLD)
        out[batch_of == (t + 1) % self.n_batches] = PREFETCH
        out[batch_of == t % self.n_batches] = CRITICAL
        return out

    def generations(self, t: int) -> np.ndarray:
        """Per slot: which request (0, 1, ...) holds it at step t; starts are staggered over one lifetime."""
        offset = np.arange(self.requests) * self.lifetime // self.requests
        return (t + offset) // self.lifetime

    def deadline_steps(self, t: int) -> np.ndarray:
        """Per slot: the step by which its current request must finish (admission + lifetime)."""
        offset = np.arange(self.requests) * self.lifetime // self.requests
        return (self.generations(t) + 1) * self.lifetime - offset

    def priorities(self, t: int) -> np.ndarray:
        return np.asarray(PRIORITIES)[(np.arange(self.requests) + self.generations(t)) % len(PRIORITIES)]



def binary_steps(w: Workload, kind: str) -> list[list[tuple[int, int, int]]]:
    """Per step, the (offset, length, code) calls that keep madvise (kind "madvise") or mlock current: calls only
    for blocks whose hot/cold state changed (step 0: every block)."""
    hot_code, cold_code = ((MADVISE_ADVICE["MADV_WILLNEED"], MADVISE_ADVICE["MADV_COLD"]) if kind == "madvise"
                           else (MLOCK, MUNLOCK))
    own = w.owners()
    out = []
    prev_hot: np.ndarray | None = None
    for t in range(w.steps):
        hot = w.slot_classes(t)[own] != COLD
        changed = np.ones(w.n_blocks, bool) if prev_hot is None else hot != prev_hot
        calls = [(o, n, hot_code) for o, n in block_runs(np.flatnonzero(changed & hot), w.block_bytes)]
        calls += [(o, n, cold_code) for o, n in block_runs(np.flatnonzero(changed & ~hot), w.block_bytes)]
        out.append(sorted(calls))
        prev_hot = hot
    return out


def intent_entries(w: Workload, t: int, pid: int, base: int, step_ns: int, t0_ns: int) -> list[mic.Entry]:
    """The registration at step t: every block LATENCY_CRITICAL with its request's deadline (CLOCK_MONOTONIC ns,
    step 0 at t0_ns) and priority, neighbours of one request coalesced (UserError past 1024 ranges)."""
    own = w.owners()
    dl = t0_ns + w.deadline_steps(t) * step_ns
    pr = w.priorities(t)
    return mic.block_entries(pid, base, w.block_bytes,
                             ((mic.LATENCY_CRITICAL, int(dl[s]), int(pr[s])) for s in own.tolist()))


def intent_update_steps(w: Workload) -> list[bool]:
    """Per step, whether the registration must be rewritten (step 0, and any step at which a request finished)."""
    out = [True]
    for t in range(1, w.steps):
        out.append(bool((w.generations(t) != w.generations(t - 1)).any()))
    return out


def changed_requests(w: Workload) -> list[int]:
    """Per step, how many requests' registrations changed (what a per-range update interface would write)."""
    out = [w.requests]
    for t in range(1, w.steps):
        out.append(int((w.generations(t) != w.generations(t - 1)).sum()))
    return out
