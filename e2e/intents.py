"""The intent mechanism of the fast tier: which class each arena slot holds after each decode step, and the madvise
advice the mapping gives that class, applied when a slot's class changes (between steps, never inside a timed op).

A slot takes the intent class of the trace's latest classifying event for the block it holds: an ALLOC or HINT
carries the importer's class, a decode-critical ACCESS makes it decode-critical (other accesses and frees carry no
class: the earlier one stands); a block being spilled is cold-spillable, a slot whose block was dropped, evicted
clean or freed is done.
"""
from __future__ import annotations

import numpy as np

from harness.intent import IntentClass
from harness.mapping import MADVISE_ADVICE, Mapping
from kv_policy import codes
from kv_policy import simulator as sim
from kv_policy.replay.plan import Plan
from kv_policy.trace import Trace

SPILLED = (sim.OP_SPILL_SYNC, sim.OP_SPILL_BG)
RELEASED = (sim.OP_DROP, sim.OP_EVICT_CLEAN, sim.OP_FREE)
CLASS_CODES = {cls: codes.CLASS_BY_NAME[cls.value] for cls in IntentClass}


def op_classes(plan: Plan, trace: Trace) -> np.ndarray:
    """Per plan op, the intent class code of its block at that op's step."""
    span = int(trace.step.max(initial=0)) + 1
    access = trace.kind == codes.ACCESS
    use = np.nonzero(((trace.kind == codes.ALLOC) | (trace.kind == codes.HINT)) | (access & trace.critical))[0]
    ev_cls = np.where(access[use], CLASS_CODES[IntentClass.DECODE_CRITICAL], trace.cls[use]).astype(np.uint8)
    keys = trace.block[use].astype(np.int64) * span + trace.step[use]
    order = np.argsort(keys, kind="stable")
    keys, cls = keys[order], ev_cls[order]
    want = plan.block.astype(np.int64) * span + plan.step
    idx = np.searchsorted(keys, want, side="right") - 1
    safe = np.maximum(idx, 0)
    known = (idx >= 0) & (keys[safe] // span == plan.block)
    out = np.where(known, cls[safe], CLASS_CODES[IntentClass.WARM]).astype(np.uint8)
    out[np.isin(plan.op, SPILLED)] = CLASS_CODES[IntentClass.COLD_SPILLABLE]
    out[np.isin(plan.op, RELEASED)] = CLASS_CODES[IntentClass.DONE]
    return out


def advice_of(mapping: Mapping) -> dict[int, tuple[int, ...]]:
    """Class code -> the madvise advice values its mapping asks for (classes without advice left out)."""
    return {CLASS_CODES[c]: tuple(MADVISE_ADVICE[a] for a in mapping.for_class(c).madvise)
            for c in IntentClass if mapping.for_class(c).madvise}


def changes(plan: Plan, trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step, slot, class code) for each slot whose class changed during a step (its last op's class that step
    differs from the class it held before), in step order."""
    sel = plan.arena >= 0
    step, slot, cls = plan.step[sel], plan.arena[sel], op_classes(plan, trace)[sel]
    order = np.lexsort((np.arange(slot.size), step, slot))  # by slot, then step, then op order
    step, slot, cls = step[order], slot[order], cls[order]
    last = np.ones(slot.size, dtype=bool)  # the last op of each (slot, step)
    last[:-1] = (slot[1:] != slot[:-1]) | (step[1:] != step[:-1])
    step, slot, cls = step[last], slot[last], cls[last]
    changed = np.ones(slot.size, dtype=bool)
    changed[1:] = (slot[1:] != slot[:-1]) | (cls[1:] != cls[:-1])
    step, slot, cls = step[changed], slot[changed], cls[changed]
    by_step = np.argsort(step, kind="stable")
    return step[by_step], slot[by_step], cls[by_step]


def by_step(plan: Plan, trace: Trace) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Step -> (slots, their new class codes) to apply at the end of that step (e2e/mm_register.py)."""
    step, slot, cls = changes(plan, trace)
    steps, starts = np.unique(step, return_index=True)
    return {int(s): (a, c) for s, a, c in zip(steps.tolist(), np.split(slot, starts[1:]), np.split(cls, starts[1:]))}


def schedule(plan: Plan, trace: Trace, mapping: Mapping) -> dict[int, list[tuple[int, np.ndarray]]]:
    """Step -> [(advice, arena slots)] to apply at the end of that step: each slot whose class changed during the
    step, grouped by the advice of the new class."""
    advice = advice_of(mapping)
    if not advice:
        return {}
    step, slot, cls = changes(plan, trace)
    out: dict[int, list[tuple[int, np.ndarray]]] = {}
    for code, advs in advice.items():
        pick = np.nonzero(cls == code)[0]
        steps, starts = np.unique(step[pick], return_index=True)
        for s, slots in zip(steps.tolist(), np.split(slot[pick], starts[1:])):
            out.setdefault(int(s), []).extend((a, slots) for a in advs)
    return out


def count(sched: dict[int, list[tuple[int, np.ndarray]]]) -> dict[str, int]:
    """madvise calls' block counts by advice name (what a cell applies per repetition)."""
    names = {v: k for k, v in MADVISE_ADVICE.items()}
    out: dict[str, int] = {}
    for calls in sched.values():
        for adv, slots in calls:
            out[names[adv]] = out.get(names[adv], 0) + int(slots.size)
    return out
