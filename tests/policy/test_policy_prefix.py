"""Online policies decide from the past only: on a trace and on any prefix of it, the decisions on the shared
part are identical (a policy that read the trace's length or a later event would differ)."""
from __future__ import annotations

import numpy as np
import pytest

from kv_policy.policies import Policy
from kv_policy.registry import is_reference, make_policy, parse_policies
from kv_policy.simulator import simulate
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from kv_policy.trace import Trace
from tests.policy.conftest import small_trace

ONLINE = [p for p in parse_policies("all") if not is_reference(p)]


def _prefix(t: Trace, n: int) -> Trace:
    return Trace(t.step[:n], t.kind[:n], t.block[:n], t.critical[:n], t.cls[:n], t.block_size, t.block_request,
                 t.block_priority, t.block_deadline_us, dict(t.meta))


def _log(trace: Trace, name: str, cap: int) -> list[tuple[int, int, int, int]]:
    res = simulate(trace, make_policy(name), for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, cap), record=True)
    ops = res.ops
    return list(zip(ops["step"].tolist(), ops["op"].tolist(), ops["block"].tolist(), ops["charge"].tolist()))


@pytest.fixture(scope="module")
def trace() -> Trace:
    return small_trace("rag_mixed_priority", 3, 14, (24, 80))


@pytest.mark.parametrize("name", ONLINE)
def test_decisions_on_a_prefix_equal_those_on_the_whole_trace(name: str, trace: Trace) -> None:
    cap = trace.peak_live_bytes() // 3
    full = _log(trace, name, cap)
    assert any(op in (3, 4) for _, op, _, _ in full), "the fast tier must be small enough to force evictions"
    for frac in (0.3, 0.55, 0.8):
        n = int(len(trace) * frac)
        part = _log(_prefix(trace, n), name, cap)
        assert part and full[:len(part)] == part, f"{name} decides differently on the first {n} events"


class _PeeksAtLength(Policy):
    """A policy that scales recency by the trace length, as the old DeadlineAware did."""

    name = "PeeksAtLength"

    def bind(self, trace: Trace) -> None:
        self.n = len(trace)
        self.prio = trace.block_priority.tolist()

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return self.prio[b] / 100.0 + 2.0 * seq / self.n


def test_the_check_catches_a_policy_that_reads_the_trace_length(trace: Trace) -> None:
    cap = trace.peak_live_bytes() // 3
    tiers = for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, cap)
    n = int(len(trace) * 0.5)
    full = simulate(trace, _PeeksAtLength(), tiers, record=True).ops
    part = simulate(_prefix(trace, n), _PeeksAtLength(), tiers, record=True).ops
    k = part["op"].size
    assert not np.array_equal(full["block"][:k], part["block"]) or not np.array_equal(full["op"][:k], part["op"])
