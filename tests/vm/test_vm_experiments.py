"""The mechanism experiments' pure parts: the churn workload, the figures and verdicts of `kvds vm lazy` and
`kvds vm churn` from repetitions, and their bad input (exit 2 before anything changes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from harness.mapping import MADVISE_ADVICE
from harness.stats import Estimate
from kernel_vm import churn, churn_run, lazy_run
from kernel_vm import experiment_figures as fig
from kernel_vm.arena import MLOCK, MUNLOCK
from kernel_vm.churn_summary import ChurnRep, churn_row
from kernel_vm.lazy_summary import LazyRep, lazy_rows
from tests.conftest import run_kvds

W = churn.Workload(n_blocks=64, block_bytes=4096, requests=8, batch=2, steps=20, lifetime=8)


def test_each_step_one_batch_decodes_and_the_next_is_prefetched() -> None:
    for t in range(W.steps):
        cls = W.slot_classes(t)
        now, nxt = t % W.n_batches, (t + 1) % W.n_batches
        assert list(np.flatnonzero(cls == churn.CRITICAL)) == [2 * now, 2 * now + 1]
        assert list(np.flatnonzero(cls == churn.PREFETCH)) == [2 * nxt, 2 * nxt + 1]
        assert (cls == churn.COLD).sum() == W.requests - 4


def test_madvise_calls_cover_exactly_the_blocks_whose_state_changed() -> None:
    steps = churn.binary_steps(W, "madvise")
    willneed, cold = MADVISE_ADVICE["MADV_WILLNEED"], MADVISE_ADVICE["MADV_COLD"]
    assert sum(n for _, n, _ in steps[0]) == W.n_blocks * W.block_bytes  # step 0 tells the kernel everything
    own = W.owners()
    for t in range(1, W.steps):
        hot_now = set(np.flatnonzero(W.slot_classes(t)[own] != churn.COLD).tolist())
        hot_before = set(np.flatnonzero(W.slot_classes(t - 1)[own] != churn.COLD).tolist())
        advised = {code: {b for off, n, c in steps[t] if c == code
                          for b in range(off // W.block_bytes, (off + n) // W.block_bytes)} for code in (willneed, cold)}
        assert advised[willneed] == hot_now - hot_before and advised[cold] == hot_before - hot_now
        assert len(steps[t]) == 2  # contiguous requests, neighbouring batches: one run each way
    locks = churn.binary_steps(W, "mlock")
    assert {c for step in locks for _, _, c in step} == {MLOCK, MUNLOCK}


def test_paged_layout_needs_one_call_per_scattered_run_and_cannot_be_registered() -> None:
    paged = churn.Workload(4096, 4096, 64, 8, 4, 128, "paged", seed=1)
    assert np.mean([len(s) for s in churn.binary_steps(paged, "madvise")[1:]]) > 500
    with pytest.raises(UserError, match="exceed the 1024"):
        churn.intent_entries(paged, 0, 1, 0, 1, 0)


def test_the_registration_changes_only_when_a_request_finishes() -> None:
    updates = churn.intent_update_steps(W)
    gens = [W.generations(t) for t in range(W.steps)]
    assert updates[0] and all(updates[t] == bool((gens[t] != gens[t - 1]).any()) for t in range(1, W.steps))
    a, b = churn.intent_entries(W, 1, 7, 1 << 30, 1000, 0), churn.intent_entries(W, 2, 7, 1 << 30, 1000, 0)
    assert len(a) == W.requests and all(e.flags == 1 and e.pid == 7 for e in a)
    # a request's deadline is its admission + lifetime: it stays put until the request finishes
    for t in range(1, W.steps):
        same = W.generations(t) == W.generations(t - 1)
        assert (W.deadline_steps(t)[same] == W.deadline_steps(t - 1)[same]).all()
    assert (a == b) == (not updates[2])
    assert churn.changed_requests(W)[0] == W.requests and sum(churn.changed_requests(W)[1:]) > 0


def test_judge_below_needs_the_whole_interval_below() -> None:
    assert fig.judge_below(Estimate(-5, -8, -2), "d").status == "met"
    assert fig.judge_below(Estimate(0, 0, 0), "d").status == "missed"  # exactly as much: no advantage
    assert fig.judge_below(Estimate(-1, -3, 1), "d").status == "inconclusive"
    assert fig.judge_below(Estimate(1.0, float("nan"), float("nan"), reason="n=2"), "d").status == "inconclusive"


def _lazy(written: int, refaults: int, dc_ns: int) -> LazyRep:
    return LazyRep(written, written, refaults, {"decode-critical": 0, "recompute-ok": refaults}, 0,
                   np.full(400, dc_ns, dtype=np.int64) + np.arange(400))


def test_lazy_rows_judge_each_pressure_against_the_reference_pair_by_pair() -> None:
    res = {("madvise-only", 0.0): [_lazy(300 + r, 290, 2000) for r in range(3)],
           ("mm-intent", 0.0): [_lazy(0, 0, 2000) for _ in range(3)],
           ("madvise-only", 50.0): [_lazy(1000 + 7 * r, 900, 2000) for r in range(3)],
           ("mm-intent", 50.0): [_lazy(1000 + 7 * r, 900, 2000) for r in range(3)]}
    rows = {(r.mapping, r.pressure_pct): r for r in lazy_rows(res, ["madvise-only", "mm-intent"], [0.0, 50.0],
                                                               "madvise-only", 4096)}
    assert rows[("madvise-only", 0.0)].verdicts == {}
    lazy0 = rows[("mm-intent", 0.0)]
    assert lazy0.written_bytes["per_rep"] == [0.0, 0.0, 0.0]
    assert lazy0.verdicts["written_fewer"]["status"] == "met"
    assert lazy0.verdicts["refaults_fewer"]["status"] == "met"
    assert lazy0.verdicts["p99_no_worse"]["status"] == "met"
    same = rows[("mm-intent", 50.0)].verdicts  # as much as the reference in every pair: no advantage, said so
    assert same["written_fewer"]["status"] == "missed" and same["refaults_fewer"]["status"] == "missed"
    assert rows[("madvise-only", 50.0)].written_bytes["mean"]["value"] == pytest.approx(4096 * 1007)


def test_churn_row_per_second_and_verdicts() -> None:
    ref = [ChurnRep([2] * 10, [10_000 + r] * 10, [12_000] * 10, []) for r in range(3)]
    cheap = [ChurnRep([0] * 9 + [5], [100 + r] * 10, [200] * 10, []) for r in range(3)]
    row = churn_row("mm-intent", cheap, ref, step_ms=20.0)
    assert row.calls_per_step["mean"]["value"] == pytest.approx(0.5)
    assert row.calls_per_s["mean"]["value"] == pytest.approx(25.0)
    assert row.verdicts["calls_fewer"]["status"] == "met" and row.verdicts["cpu_less"]["status"] == "met"
    assert row.cpu_share_of_step["mean"]["value"] == pytest.approx(0.101 / 20_000.0)  # 101 ns of a 20 ms step
    costly = [ChurnRep([2] * 10, [50_000 + r] * 10, [60_000] * 10, []) for r in range(3)]
    row = churn_row("mlock", costly, ref, step_ms=20.0)
    assert row.verdicts["calls_fewer"]["status"] == "missed" and row.verdicts["cpu_less"]["status"] == "missed"
    assert churn_row("madvise", ref, None, 20.0).verdicts == {}


@pytest.mark.parametrize("cfg, message", [
    (churn_run.ChurnConfig(mechanisms="madvise,bogus"), "--mechanisms"),
    (churn_run.ChurnConfig(mechanisms="mlock"), "must include madvise"),
    (churn_run.ChurnConfig(requests=10, batch=3), "whole number of batches"),
    (churn_run.ChurnConfig(blocks=100, requests=64, batch=8), "split evenly"),
    (churn_run.ChurnConfig(layout="tree"), "--layout"),
    (churn_run.ChurnConfig(block_kb=3), "whole number of pages"),
])
def test_churn_bad_input(cfg: churn_run.ChurnConfig, message: str) -> None:
    with pytest.raises(UserError, match=message):
        churn_run.plan(cfg)


@pytest.mark.parametrize("cfg, message", [
    (lazy_run.LazyConfig(pressures="0,100"), r"not in \[0, 100\)"),
    (lazy_run.LazyConfig(pressures="0,x"), "not a number"),
    (lazy_run.LazyConfig(pressures="10,10"), "repeated"),
    (lazy_run.LazyConfig(reference="none"), "not one of --mapping"),
    (lazy_run.LazyConfig(mapping="madvise-only,nosuch"), "nosuch"),
    (lazy_run.LazyConfig(mapping="madvise-only,memcg-protect", pressures="95"), "lower --pressure"),
])
def test_lazy_bad_input(cfg: lazy_run.LazyConfig, message: str) -> None:
    with pytest.raises(UserError, match=message):
        lazy_run.plan(cfg)


def test_bad_input_exits_2_with_one_line(kvds_env: dict[str, str]) -> None:
    for argv in (["vm", "lazy", "--pressures", "0,200"], ["vm", "churn", "--requests", "10", "--batch", "3"]):
        res = run_kvds(argv, kvds_env)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_overcommit_tiers_are_equal_shuffled_and_ranked_by_deadline_or_priority() -> None:
    from kernel_vm.overcommit import SPILL, TIERS, Geometry

    geo = Geometry(n_blocks=100, block_bytes=4096, page_bytes=4096, critical_pct=80.0, seed=3)
    tier = geo.block_tier()
    sizes = [int((tier == t).sum()) for t in range(TIERS)]
    assert sum(sizes) == 80 and max(sizes) - min(sizes) <= 1 and int((tier == SPILL).sum()) == 20
    assert not (np.diff(np.flatnonzero(tier == 0)) == 1).all()  # shuffled: position tells reclaim nothing
    by_deadline = [geo.intent(t, 1000) for t in range(TIERS)]
    assert len({p for _, _, p in by_deadline}) == 1  # only the deadline ranks them
    assert [d for _, d, _ in by_deadline] == sorted((d for _, d, _ in by_deadline), reverse=True)  # 0: farthest
    prio = Geometry(100, 4096, 4096, 80.0, rank="priority")
    assert [prio.intent(t, 1000)[2] for t in range(TIERS)] == [63, 127, 191, 255]
    assert geo.intent(SPILL, 1000) == (0x2, 0, 0)
    entries = geo.entries(9, 1 << 30, 1000)
    assert sum(e.length for e in entries) == 100 * 4096  # every block registered, neighbours coalesced
    with pytest.raises(UserError, match="enough for all"):
        geo.check_overcommitted(10.0)
    geo.check_overcommitted(30.0)


def _over(late_top: int, killed: bool = False, slow_ns: int = 2000) -> "OvercommitRep":
    from kernel_vm.overcommit_repetition import OvercommitRep

    lat = [np.full(400, 2000 if t < 3 else slow_ns, dtype=np.int64) + np.arange(400) for t in range(4)]
    return OvercommitRep(killed=killed, swapped_pages=[40, 0, 0, late_top * 16, 20], late_blocks=[10, 0, 0, late_top],
                         tier_blocks=[25, 25, 25, 25], latency_ns=lat)


def test_overcommit_row_judges_the_nearest_tier_against_the_reference() -> None:
    from kernel_vm.overcommit_summary import overcommit_row

    ref = [_over(6 + r, slow_ns=90_000) for r in range(3)]
    row = overcommit_row("mm-intent", [_over(0) for _ in range(3)], ref)
    assert row.verdicts["late_fewer"]["status"] == "met" and row.verdicts["p99_lower"]["status"] == "met"
    assert row.late_share == [0.4, 0.0, 0.0, 0.0] and row.swapped_pages[-1]["mean"]["value"] == 20
    same = overcommit_row("none", [_over(6 + r, slow_ns=90_000) for r in range(3)], ref).verdicts
    assert same["late_fewer"]["status"] == "missed"  # as late as the reference in every pair
    assert overcommit_row("memcg", ref, None).verdicts == {}
    stuck = _over(0, killed=True)
    stuck.limit_write_s, stuck.limit_write_interrupted = 30.0004, True   # the bound ended the limit write
    row = overcommit_row("mlock", [stuck, _over(0)], None)
    assert row.limit_write_interrupted == [True, False] and row.limit_write_s == [30.0, 0.0]


def test_block_worst_is_the_slowest_page_of_each_block() -> None:
    from kernel_vm.overcommit import block_worst

    assert block_worst(np.array([1, 9, 3, 2, 8, 4]), 3).tolist() == [9, 8]


@pytest.mark.parametrize("cfg, message", [
    ({"mechanisms": "memcg,bogus"}, "--mechanisms"),
    ({"reference": "mlock", "mechanisms": "memcg,none"}, "not one of"),
    ({"pressure_pct": 10.0}, "enough for all"),
    ({"rank": "size"}, "--rank"),
    ({"block_kb": 3}, "whole pages"),
    ({"mglru": "both"}, "--mglru"),
])
def test_overcommit_bad_input(cfg: dict, message: str) -> None:
    from kernel_vm.overcommit_run import OvercommitConfig, plan

    with pytest.raises(UserError, match=message):
        plan(OvercommitConfig(**cfg))


DATA = Path(__file__).resolve().parent.parent / "data" / "vm"


def test_a_captured_guest_churn_summary_reads_back_and_renders(capsys: pytest.CaptureFixture[str]) -> None:
    from kernel_vm import render
    from kernel_vm.churn_summary import ChurnSummary

    s = ChurnSummary.from_json(json.loads((DATA / "churn-guest-summary.json").read_text()))
    assert s.clock == "icount:0" and s.intent_ranges == 64 and s.unavailable == {}
    rows = {r["mechanism"]: r for r in s.rows}
    assert rows["mm-intent"]["calls_per_step"]["mean"]["value"] == pytest.approx(32.4975)
    assert rows["mm-intent"]["verdicts"]["cpu_less"]["status"] == "missed"
    render.churn(s)
    out = capsys.readouterr().out
    assert "mm-intent" in out and "missed (goal calls per step - madvise's < 0" in out and "icount:0" in out


def test_a_killed_repetition_is_left_out_of_figures_and_pairs() -> None:
    res = {("madvise-only", 50.0): [_lazy(1000, 900, 2000), None, _lazy(1010, 905, 2000), _lazy(990, 880, 2000)],
           ("mm-intent", 50.0): [_lazy(800, 700, 2000), _lazy(790, 690, 2000), None, _lazy(805, 705, 2000)]}
    rows = {r.mapping: r for r in lazy_rows(res, ["madvise-only", "mm-intent"], [50.0], "madvise-only", 4096)}
    assert rows["madvise-only"].killed_reps == 1 and rows["mm-intent"].killed_reps == 1
    assert rows["mm-intent"].written_bytes["per_rep"] == [800 * 4096, 790 * 4096, 805 * 4096]
    v = rows["mm-intent"].verdicts["written_fewer"]  # pairs 0 and 3 only: -200 and -185 pages
    assert v["value"] == pytest.approx(-192.5) and v["status"] == "inconclusive"  # two pairs: no interval


def test_the_kernels_ranges_file_sums_pages_per_tier_of_the_process() -> None:
    from kernel_vm.overcommit_repetition import parse_ranges

    text = ("7 0x7f0000000000 0x10000 0x1 100 128 0 0 16 0\n"
            "7 0x7f0000010000 0x20000 0x1 100 128 0 2 30 0\n"
            "7 0x7f0000030000 0x10000 0x1 50 128 3 16 0 0\n"
            "7 0x7f0000040000 0x10000 0x2 0 0 0 0 0 16\n"      # reclaimable: no tier of its own
            "8 0x7f0000000000 0x10000 0x1 100 128 0 0 99 0\n")  # another process
    assert parse_ranges(text, 7) == {"0": {"ranges": 2, "bytes": 0x30000, "kept": 2, "yielded": 46, "demoted": 0},
                                     "3": {"ranges": 1, "bytes": 0x10000, "kept": 16, "yielded": 0, "demoted": 0}}
    with pytest.raises(ValueError, match="10 fields"):
        parse_ranges("7 0x0 0x1000 0x1 0 0\n", 7)


def test_swap_device_writes_come_from_the_block_layers_counters() -> None:
    from kernel_vm import swap_backend

    devices = sorted(p.name for p in Path("/sys/block").iterdir() if (p / "stat").exists())
    if not devices:
        pytest.skip("no block device with a stat file")
    fields = (Path("/sys/block") / devices[0] / "stat").read_text().split()
    assert swap_backend.written_bytes(f"/dev/{devices[0]}") >= int(fields[6]) * 512  # a counter: it only grows
