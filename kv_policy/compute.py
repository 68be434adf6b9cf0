"""Accelerator-side costs derived from the model shape: a decode step's compute time and a block's recompute time.

They price the two things the KV tiers alone cannot: how long a step computes (background I/O overlaps it,
so it is also the per-step slow-tier budget for prefetch and background spill, and it is part of the
latency a TPOT deadline is checked against), and what recomputing a dropped block costs instead of
reading it back.

Defaults (one documented accelerator, override with --set-like flags in `options.py`):
* decode is memory-bound: one step streams the fp16 weights once, at ACCEL_HBM_BPS (1 TB/s);
* recompute is compute-bound prefill of the block's tokens: 2 x params FLOPs per token at ACCEL_FLOPS
  (100 TFLOP/s effective).
qwen2.5-1.5b: step 3.1 ms, a 16-token block 0.49 ms; llama3-8b: step 16 ms, a 16-token block 2.6 ms.
"""
from __future__ import annotations

from kv_policy.footprint import ModelShape, model_shape
from kv_policy.trace import Trace

ACCEL_HBM_BPS = 1e12
ACCEL_FLOPS = 100e12
WEIGHT_BYTES = 2          # fp16 weights
# Traces that name no model (prototype JSONL) have no compute modelled (a step is its KV stall alone), so there
# is no time for background I/O to hide behind: their I/O budget is 0 and every prefetch or background spill
# is refused. (It was 1 ms per step: free device time that, replayed, queued 3,303 look-ahead prefetches
# ahead of demand reads on the seed JSONL; see README "Simulator".)
UNKNOWN_MODEL_BUDGET_US = 0.0


def step_compute_us(shape: ModelShape) -> float:
    """One decode step's compute: the weights read once from accelerator memory."""
    return WEIGHT_BYTES * shape.n_params() / ACCEL_HBM_BPS * 1e6


def recompute_us_per_byte(shape: ModelShape) -> float:
    """Prefill cost of recomputing KV, per KV byte (2 x params FLOPs per token / bytes of KV per token)."""
    per_token_us = 2.0 * shape.n_params() / ACCEL_FLOPS * 1e6
    return per_token_us / shape.bytes_per_token()


def model_of(trace: Trace) -> ModelShape | None:
    """The model a trace was generated or batched for (its meta), or None when it names none."""
    prof = trace.meta.get("profile") if isinstance(trace.meta, dict) else None
    name = prof.get("model") if isinstance(prof, dict) else None
    return model_shape(name) if name else None
