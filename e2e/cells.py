"""The factorial design: {baseline policy, kvds's policy} x {no intents, intent mapping}, and what one cell runs.

Both cells of a policy execute the same plan (the policy's simulated decisions, kv_policy/replay): the mechanisms
change how the kernel serves the plan, never what it decides, so the two factors are separable.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.mapping import Mapping, load_mapping
from kv_policy.compare import Capacity
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.replay import session as rp
from kv_policy.replay.execute import IoClasses
from kv_policy.tiers import Tier, TierModel, for_trace
from kv_policy.trace import Trace
from e2e import intents

NO_INTENTS = "none"


@dataclass(frozen=True)
class Cell:
    policy: str
    intents: bool

    @property
    def name(self) -> str:
        return f"{self.policy} / {'intents' if self.intents else 'no intents'}"


def cells(baseline: str, policy: str) -> list[Cell]:
    """In the order alternating_order starts from: the reference cell first."""
    return [Cell(baseline, False), Cell(baseline, True), Cell(policy, False), Cell(policy, True)]


@dataclass
class Prepared:
    """The trace slice, each policy's simulation and plan, and each intent schedule (no kernel state yet)."""
    trace: Trace
    work: dict[str, rp.PolicyReplay]
    mapping: Mapping
    schedule: dict[str, dict[int, list[tuple[int, np.ndarray]]]]
    source_block_bytes: int
    tiers: TierModel      # what the plans were simulated with
    classes: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]  # per policy: step -> (slots, new class codes)

    def io(self, cell: Cell) -> IoClasses:
        return rp.io_classes(self.mapping.source if cell.intents else NO_INTENTS)

    def mapping_of(self, cell: Cell) -> Mapping:
        return self.mapping if cell.intents else load_mapping(NO_INTENTS)

    def steps(self) -> int:
        return int(np.unique(self.trace.step).size)

    def facts(self) -> dict[str, Any]:
        return {"steps": self.steps(), "events": len(self.trace), "counts": self.trace.counts(),
                "block_bytes": int(self.trace.block_size.max(initial=0)),
                "source_block_bytes": self.source_block_bytes, "meta": self.trace.meta}


def scaled(trace: Trace, block_bytes: int) -> Trace:
    """Every block `block_bytes` long: the trace's KV blocks scaled down so its live set fits a shared host (the
    simulator and the replay see the same scaled trace, so simulated and measured stay comparable)."""
    return dataclasses.replace(trace, block_size=np.full_like(trace.block_size, block_bytes),
                               meta=dict(trace.meta, block_bytes_scaled_to=block_bytes))


def prepare(opts: TraceOptions, steps: int, block_bytes: int, policies: list[str], cap: Capacity, fast: Tier,
            slow: Tier, mapping: str, seed: int) -> Prepared:
    full = rp.truncate(load_trace(opts, seed=seed), steps)
    src = int(full.block_size.max(initial=0))
    trace = scaled(full, block_bytes)
    work = rp.plan_all(trace, policies, cap, fast, slow)
    m = load_mapping(mapping)
    return Prepared(trace, work, m, {p: intents.schedule(w.plan, trace, m) for p, w in work.items()}, src,
                    for_trace(trace, fast, slow, cap.for_trace(trace)),
                    {p: intents.by_step(w.plan, trace) for p, w in work.items()})
