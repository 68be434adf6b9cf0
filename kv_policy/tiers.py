"""Fast/slow tier cost model: latency + size / bandwidth, so costs follow block size instead of constants."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from harness.errors import UserError


@dataclass(frozen=True)
class Tier:
    """One memory/storage tier. Bandwidth in GB/s (1e9 bytes/s), latency in microseconds."""

    name: str
    read_latency_us: float
    read_gbps: float
    write_latency_us: float
    write_gbps: float

    def read_us(self, nbytes: int) -> float:
        return self.read_latency_us + nbytes / (self.read_gbps * 1e3)

    def write_us(self, nbytes: int) -> float:
        return self.write_latency_us + nbytes / (self.write_gbps * 1e3)


# Defaults (documented in README.md): host DRAM read by one core, and an NVMe-class SSD
# behind a loop device; `kvds policy replay` prints the measured numbers so they can be re-fit.
DEFAULT_FAST = Tier("fast", read_latency_us=0.1, read_gbps=10.0, write_latency_us=0.1, write_gbps=10.0)
DEFAULT_SLOW = Tier("slow", read_latency_us=80.0, read_gbps=2.0, write_latency_us=20.0, write_gbps=1.0)


@dataclass(frozen=True)
class TierModel:
    """Both tiers, their capacities in bytes (slow_capacity 0 = unlimited), and the per-step costs.

    `step_us` is a decode step's compute time: added to each step's KV stall before the TPOT check, and
    the slow-tier time per step that background I/O (prefetch reads and the spills they cause) may use
    (`io_budget_us`, default = `step_us`). `recompute_us_per_byte` prices recomputing a dropped block
    (inf = recompute impossible). Built from a trace's model shape by `for_trace`.
    """

    fast: Tier
    slow: Tier
    fast_capacity: int
    slow_capacity: int = 0
    step_us: float = 0.0
    io_budget_us: float = math.inf
    recompute_us_per_byte: float = math.inf

    def recompute_us(self, nbytes: int) -> float:
        return nbytes * self.recompute_us_per_byte


def for_trace(trace, fast: Tier, slow: Tier, fast_capacity: int, slow_capacity: int = 0,
              io_budget_us: float | None = None) -> TierModel:
    """The tier model with compute, I/O budget and recompute costs derived from the trace's model shape."""
    from kv_policy.compute import UNKNOWN_MODEL_BUDGET_US, model_of, recompute_us_per_byte, step_compute_us

    shape = model_of(trace)
    if shape is None:
        budget = UNKNOWN_MODEL_BUDGET_US if io_budget_us is None else io_budget_us
        return TierModel(fast, slow, fast_capacity, slow_capacity, 0.0, budget)
    step = step_compute_us(shape)
    return TierModel(fast, slow, fast_capacity, slow_capacity, step,
                     step if io_budget_us is None else io_budget_us, recompute_us_per_byte(shape))


def apply_overrides(tier: Tier, overrides: list[str]) -> Tier:
    """Apply 'fast.read_latency_us=0.2'-style overrides addressed to this tier."""
    names = {f.name for f in fields(Tier)} - {"name"}
    for item in overrides:
        key, sep, value = item.partition("=")
        tier_name, _, field = key.partition(".")
        if not sep or tier_name not in ("fast", "slow") or field not in names:
            raise UserError(f"bad tier override {item!r} (form: fast|slow.<{'|'.join(sorted(names))}>=<number>)")
        if tier_name != tier.name:
            continue
        try:
            number = float(value)
        except ValueError:
            raise UserError(f"tier override {item!r}: {value!r} is not a number") from None
        if number < 0 or (field.endswith("gbps") and number == 0):
            raise UserError(f"tier override {item!r}: must be positive")
        tier = replace(tier, **{field: number})
    return tier
