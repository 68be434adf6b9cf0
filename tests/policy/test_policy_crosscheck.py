"""kvds's plain-sequence LRU, ARC, S3-FIFO and MIN: hand-checked eviction on tiny sequences, and equal hit ratios
with libCacheSim's (the `libcachesim` package) on a slice of a real trace and on a generated sequence."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kv_policy import crosscheck_run
from kv_policy.sequence import ALGORITHMS, arc, belady, lru, s3fifo, source, vllm_offload_arc
from tests.conftest import REPO, run_kvds

SLICE = REPO / "tests" / "data" / "mooncake_conversation_head2000.jsonl"  # origin: tests/data/README.md
BELADY_STRING = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1]  # the textbook reference string


def seq(xs: list[int]) -> np.ndarray:
    return np.asarray(xs, dtype=np.int64)


def test_lru_evicts_the_least_recent() -> None:
    # cap 3: 1 2 3 | 1 hit (order 2 3 1) | 4 evicts 2 | 2 evicts 3 | 5 evicts 1 | 1 misses
    assert lru.hits(seq([1, 2, 3, 1, 4, 2, 5, 1]), 3) == 1
    assert lru.hits(seq(BELADY_STRING), 3) == 20 - 12  # 12 faults with 3 frames (the textbook's LRU figure)


def test_min_is_the_textbook_optimum() -> None:
    assert belady.hits(seq(BELADY_STRING), 3) == 20 - 9  # 9 faults with 3 frames (the textbook's OPT figure)
    assert belady.hits(seq([1, 2, 3, 4, 1, 2]), 2) == 1  # keeps 1 (next use 4) over 2 and 3, then must drop one


def test_arc_ghost_hits_adapt_and_promote() -> None:
    # cap 2: 1 m (T1) | 1 h (T2) | 2 m (T1) | 3 m: T1's 2 -> B1 | 2: B1 ghost hit, p=1, T2's 1 -> B2, 2 into T2 |
    # 1: B2 ghost hit, p=0, T1's 3 -> B1, 1 into T2: one hit in all
    assert arc.hits(seq([1, 1, 2, 3, 2, 1]), 2) == 1
    c = arc._Arc(2)
    for b in [1, 1, 2, 3, 2, 1]:
        c.get(b)
    assert list(c.t2) == [2, 1] and list(c.t1) == [] and list(c.b1) == [3] and list(c.b2) == [] and c.p == 0.0


def test_vllm_offload_arc_ghost_hits_enter_t1() -> None:
    # cap 2: 1 m (T1) | 1 h (T2) | 2 m (T1) | 3 m: |T1| = 1 >= int(target 0): T1's 2 -> B1, 3 into T1 |
    # 2: B1 ghost hit, target 1; |T1| = 1 >= 1: T1's 3 -> B1, 2 into T1 (textbook ARC would evict T2's 1) | 1 hits
    assert vllm_offload_arc.hits(seq([1, 1, 2, 3, 2, 1]), 2) == 2
    c = vllm_offload_arc._OffloadArc(2)
    for b in [1, 1, 2, 3, 2]:
        c.get(b)
    assert list(c.t1) == [2] and list(c.t2) == [1] and list(c.b1) == [3] and c.target == 1.0


def test_s3fifo_small_queue_main_queue_and_ghost() -> None:
    # cap 20: small FIFO 2, main 18, ghost 18. 0 1 fill small, 2..19 go to main (small full before any eviction);
    # 0 0 hit (freq 2); 20: small's 0 (freq 2) moves to main, 1 (freq 0) -> ghost, 20 into small; 1: ghost hit,
    # main (19 > 18) evicts its oldest, 2, and 1 enters main; 2 misses: main evicts 3, 2 enters small; 0 hits in
    # main; 3 misses: three hits in all
    xs = list(range(20)) + [0, 0, 20, 1, 2, 0, 3]
    assert s3fifo.hits(seq(xs), 20) == 3
    c = s3fifo._S3Fifo(20)
    for b in xs[:-1]:
        c.get(b)
    assert list(c.small) == [20, 2] and list(c.main)[:2] == [4, 5] and list(c.main)[-2:] == [0, 1]
    # scan resistance: one-time blocks 20, 21, 22 leave through the small FIFO, so main's 2 survives them (LRU
    # evicts 0, 1, 2)
    scan = list(range(20)) + [20, 21, 22, 2]
    assert s3fifo.hits(seq(scan), 20) == 1 and lru.hits(seq(scan), 20) == 0


def test_s3fifo_admits_nothing_below_a_two_block_small_queue() -> None:
    # libCacheSim's S3FIFO_insert refuses a block as large as the small FIFO (floor(0.1 x 19) = 1 block)
    assert s3fifo.hits(seq([1, 1, 1]), 19) == 0
    assert s3fifo.hits(seq([1, 1, 1]), 20) == 2


def test_mooncake_sequence_is_hash_ids_in_arrival_order(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 5, "hash_ids": [7, 8]}\n{"timestamp": 1, "hash_ids": [7]}\n'
                 '{"timestamp": 5, "hash_ids": [9]}\n')
    assert source.mooncake(p).blocks.tolist() == [7, 7, 8, 9]


def check(summary: crosscheck_run.CrosscheckSummary, capacities: tuple[float, ...]) -> None:
    assert {(r["algorithm"], r["capacity_share"]) for r in summary.rows} == \
        {(a, c) for a in ALGORITHMS for c in capacities}
    for r in summary.rows:
        assert abs(r["kvds_hit_ratio"] - r["libcachesim_hit_ratio"]) <= 0.001, r
    assert summary.agree


def test_hit_ratios_equal_libcachesim_on_a_mooncake_slice(kvds_env: dict) -> None:
    out = crosscheck_run.run(crosscheck_run.CrosscheckConfig(str(SLICE)))
    check(out.summary, crosscheck_run.DEFAULT_CAPACITIES)
    assert out.summary.requests == 54_559 and out.summary.unique_blocks == 38_788
    assert [(r["algorithm"], r["capacity_share"]) for r in out.summary.engine_rows] == \
        [("vLLM-offload-ARC", c) for c in crosscheck_run.DEFAULT_CAPACITIES]
    assert (out.run.path / "summary.json").is_file()


def test_hit_ratios_equal_libcachesim_on_a_generated_sequence(kvds_env: dict) -> None:
    out = crosscheck_run.run(crosscheck_run.CrosscheckConfig(None, (0.02, 0.2)))
    check(out.summary, (0.02, 0.2))


def test_cli_crosscheck_json_and_bad_input(tmp_path: Path, kvds_env: dict) -> None:
    p = run_kvds(["policy", "crosscheck", "--trace", str(SLICE), "--capacities", "0.05", "--json"], kvds_env)
    assert p.returncode == 0, p.stderr
    assert '"agree": true' in p.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "hash_ids": [1, 2]}\n{"timestamp": 1, "hash_ids": [1, "x"]}\n')
    for args, msg in ((["--capacities", "0.05,2"], "each share must be in (0, 1]"),
                      (["--capacities", "a"], "expected comma-separated numbers"),
                      (["--trace", str(tmp_path / "none.jsonl")], "no such file"),
                      (["--trace", str(bad)], "bad.jsonl:2: hash_ids must be a list of integers"),
                      (["--trace", str(SLICE), "--capacities", "0.0001"], "is 3 blocks: the cross-check needs")):
        p = run_kvds(["policy", "crosscheck", "--capacities", "0.25", *args], kvds_env)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and msg in p.stderr, (args, p.stderr)


@pytest.mark.parametrize("xs,cap", [([1, 1, 2, 3, 2, 1], 2), (BELADY_STRING, 3),
                                    (list(range(20)) + [0, 0, 20, 1, 2, 0, 3], 20),
                                    (list(range(20)) + [20, 21, 22, 2], 20)])
def test_hand_checked_sequences_agree_with_libcachesim(xs: list[int], cap: int) -> None:
    from kv_policy.sequence.libcachesim_runner import OracleTrace

    with OracleTrace(seq(xs)) as t:
        for name, hits in ALGORITHMS.items():
            if name == "S3-FIFO" and cap < crosscheck_run.MIN_BLOCKS:
                continue  # libCacheSim's S3-FIFO aborts the process below a 2-block small FIFO
            assert round(t.run(name, cap).hit_ratio * len(xs)) == hits(seq(xs), cap), name
