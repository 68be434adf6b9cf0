"""`kvds policy gap`: each decode-critical read classified by what the engine knows then, and the misses counted
per class so that every class's counts add up to the run's totals."""
from __future__ import annotations

import numpy as np

from kv_policy import codes, gap
from kv_policy.compare import Capacity, build
from kv_policy.gap_run import GapConfig, run
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.profiles import get_profile
from kv_policy.tiers import DEFAULT_FAST, DEFAULT_SLOW, for_trace
from kv_policy.trace import Trace

A, R, H, F = codes.ALLOC, codes.ACCESS, codes.HINT, codes.FREE


def _hand_trace() -> Trace:
    """Block 0 a shared prefix block (request -1), block 1 a generated block of request 0."""
    ev = [(0, A, 0, False, codes.WARM), (0, R, 0, False, 0), (0, A, 1, False, codes.DECODE_CRITICAL),
          (0, R, 1, True, 0), (0, R, 0, True, 0), (5, R, 0, True, 0), (200, R, 0, True, 0),
          (201, H, 1, False, codes.WARM), (203, R, 1, True, 0), (204, F, 1, False, 0)]
    col = list(zip(*ev))
    return Trace(np.array(col[0], dtype=np.int64), np.array(col[1], dtype=np.uint8), np.array(col[2], dtype=np.int32),
                 np.array(col[3], dtype=bool), np.array(col[4], dtype=np.uint8), np.array([16, 16], dtype=np.int64),
                 np.array([-1, 0], dtype=np.int32), np.array([50, 80], dtype=np.uint8),
                 np.array([1e5, 5e4], dtype=np.float64))


def _labels(row: np.ndarray) -> dict[str, str]:
    return {name: labels[v] for (name, labels), v in zip(gap.FEATURES.items(), row.tolist())}


def test_each_read_is_classified_by_what_was_known_then() -> None:
    rows = gap.classify(_hand_trace(), block_tokens=16)
    got = [_labels(r) for r in rows]
    assert len(got) == 5  # one row per decode-critical read, in trace order
    assert got[0] == {"role": "sink/window", "block": "generated", "hh_reads_before": "0", "steps_since_read": "1",
                      "prefix_recurrence": "-", "prefix_depth": "-", "band": "high"}
    assert [g["hh_reads_before"] for g in got[1:4]] == ["0", "1", "2-4"]
    assert [g["steps_since_read"] for g in got[1:4]] == ["1", "2-10", "101-1000"]
    assert {(g["block"], g["role"], g["prefix_recurrence"], g["prefix_depth"], g["band"]) for g in got[1:4]} == \
        {("prefix", "heavy-hitter", "1", "0", "mid")}
    # slid out of the window (a non-critical WARM hint): a heavy-hitter candidate from then on
    assert (got[4]["role"], got[4]["hh_reads_before"], got[4]["steps_since_read"]) == ("heavy-hitter", "0", "101-1000")


def test_counts_add_up_to_each_rows_misses_on_a_mooncake_slice() -> None:
    profile = get_profile("balanced")
    trace = load_trace(TraceOptions("mooncake-slice", max_requests=12), profile, 0)
    tiers = for_trace(trace, DEFAULT_FAST, DEFAULT_SLOW, Capacity(0.1).for_trace(trace))
    masks = {p: gap.dc_miss_mask(trace, build(p), tiers) for p in ("LRU", "MIN")}
    feats = gap.classify(trace, profile.block_tokens)
    assert feats.shape == (int((trace.kind == codes.ACCESS)[trace.critical].sum()), len(gap.FEATURES))
    counts = gap.count(feats, masks)
    for name in gap.FEATURES:
        assert sum(counts.reads[name]) == counts.n_reads
        for p in masks:
            assert sum(counts.misses[p][name]) == counts.totals[p]
    assert counts.totals["MIN"] < counts.totals["LRU"]
    assert counts.totals["LRU"] == sum(masks["LRU"]) and counts.reads["block"][0] > 0  # prefix blocks are read


def test_gap_run_files_shares_that_sum_to_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KVDS_RESULTS_DIR", str(tmp_path))
    cfg = GapConfig(get_profile("balanced"), [0, 1, 2, 3, 4], "ExpectedNextUse", "vLLM-prefix", DEFAULT_FAST,
                    DEFAULT_SLOW, Capacity(0.1), 0, TraceOptions("mooncake-slice", max_requests=8))
    s = run(cfg).summary
    assert set(s.dc_misses) == {"ExpectedNextUse", "vLLM-prefix", "RateOracle", "MIN"}  # a generated trace: rates
    for feature, shares in s.excess_share.items():
        assert abs(sum(e["value"] for e in shares.values()) - 1.0) < 1e-9, feature
    assert 0.0 <= s.first_hh_prefix_share["value"] <= 1.0
