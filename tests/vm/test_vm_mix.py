"""The workload mix and arena layout (pure logic: no kernel state)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import load_mapping
from kernel_vm import damon
from kernel_vm.mix import CLASSES, DEFAULT_MIX, format_mix, make_layout, parse_mix


def test_default_mix_round_trips_and_sums_to_100() -> None:
    assert parse_mix(format_mix(DEFAULT_MIX)) == DEFAULT_MIX
    assert sum(DEFAULT_MIX.values()) == 100


@pytest.mark.parametrize("spec", ["", "warm", "warm=50", "warm=abc,done=100", "nosuch=100", "warm=101,done=-1",
                                  "warm=nan,done=100"])
def test_bad_mix_is_a_user_error(spec: str) -> None:
    with pytest.raises(UserError):
        parse_mix(spec)


def test_layout_has_exact_shares_interleaved_and_page_aligned_blocks() -> None:
    mix = parse_mix("decode-critical=10,prefetch-soon=10,warm=30,cold-spillable=30,recompute-ok=15,done=5")
    lay = make_layout(64 << 20, 64 << 10, 4096, mix, seed=3)
    assert lay.n_blocks == 1024 and lay.pages_per_block == 16
    counts = lay.class_pages()
    for cls, share in mix.items():  # largest-remainder rounding: each class within one block of its share
        assert abs(counts[cls] / 16 - share / 100 * 1024) < 1
    assert sum(counts.values()) == lay.n_pages
    dc = lay.blocks_of(IntentClass.DECODE_CRITICAL)
    assert dc.min() < lay.n_blocks // 4 and dc.max() > 3 * lay.n_blocks // 4  # spread, not one run
    assert [c for c, _ in lay.decode_order()][0] is IntentClass.DECODE_CRITICAL
    assert np.array_equal(make_layout(64 << 20, 64 << 10, 4096, mix, seed=3).block_class, lay.block_class)


def test_block_not_whole_pages_is_refused() -> None:
    with pytest.raises(UserError):
        make_layout(1 << 20, 6000, 4096, DEFAULT_MIX)


def test_damos_plan_covers_each_class_exactly_with_merged_regions() -> None:
    """fvaddr schemes cover exactly the class's blocks; paddr-only actions (lru_prio/lru_deprio) need a memcg
    to filter on and are left out, with the reason, without one."""
    lay = make_layout(16 << 20, 64 << 10, 4096, DEFAULT_MIX, seed=1)
    base = 0x7F0000000000
    intent = load_mapping("intent")
    plan, left_out = damon.plan(intent, lay, base)
    wanted = {c.value for c in CLASSES if intent.for_class(c).damos_action}
    assert {p.cls for p in plan} == {c for c in wanted if intent.for_class(c).damos_action in damon.VADDR_ACTIONS}
    assert set(left_out) == wanted - {p.cls for p in plan} and all("paddr-only" in w for w in left_out.values())
    for p in plan:
        cls = IntentClass.parse(p.cls)
        assert p.ops == "fvaddr" and p.memcg_path is None
        covered = sum(e - s for s, e in p.regions)
        assert covered == lay.blocks_of(cls).size * lay.block_bytes
        assert all(s % 4096 == 0 and e % 4096 == 0 for s, e in p.regions)
        assert all(p.regions[i][1] < p.regions[i + 1][0] for i in range(len(p.regions) - 1))  # merged, sorted
    assert damon.plan(load_mapping("none"), lay, base) == ([], {})
