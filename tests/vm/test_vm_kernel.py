"""The VM track on the real kernel: madvise per page, memcg placement under a squeeze, state restored.

Needs root, zram and a memory cgroup (skips with the doctor's reasons otherwise). Small arenas keep the
whole file within seconds; figures belong to `kvds vm bench`, these tests assert behaviour only.
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from harness import doctor, journal
from harness.errors import Unavailable
from harness.intent import IntentClass
from harness.knobs.cgroups import hierarchy_for
from harness.mapping import MADVISE_ADVICE, load_mapping
from kernel_vm import damon, measure, mglru, swap_backend
from kernel_vm.arena_process import ArenaProcess
from kernel_vm.mix import CLASSES, DEFAULT_MIX, make_layout
from kernel_vm.placement import create_budget_split
from kernel_vm.repetition import run_once
from tests.conftest import journals_of, needs_root, run_kvds

pytestmark = [needs_root, doctor.skip_unless("swap.zram", "memcg")]

DC = CLASSES.index(IntentClass.DECODE_CRITICAL)


def _leftovers(pid: int, devices: list[str]) -> list[str]:
    """What a kvds process (pid) that set up `devices` could have left behind: active swaps, zram devices,
    swapfiles, memory cgroups named kvds-<pid>-*. Other engineers' runs on the same host do not count."""
    _, root = hierarchy_for("memory")
    swaps = {os.path.realpath(line.split()[0]) for line in Path("/proc/swaps").read_text().splitlines()[1:]}
    out = [f"swap {d} still on" for d in devices if os.path.realpath(d) in swaps]
    out += [f"{d} still exists" for d in devices if d.startswith("/dev/zram") and Path("/sys/block", Path(d).name).exists()]
    out += [f"swapfile {d} still exists" for d in devices if not d.startswith("/dev/") and Path(d).exists()]
    out += [f"cgroup {p.name} still exists" for p in root.iterdir() if p.name.startswith(f"kvds-{pid}-")]
    return out


def _zswap() -> str | None:
    zs = Path("/sys/module/zswap/parameters/enabled")
    return zs.read_text() if zs.exists() else None


def test_pageout_moves_the_cold_class_out_page_by_page(kvds_env: dict[str, str]) -> None:
    lay = make_layout(16 << 20, 64 << 10, mmap.PAGESIZE, DEFAULT_MIX, seed=5)
    cold = lay.blocks_of(IntentClass.COLD_SPILLABLE)
    done = lay.blocks_of(IntentClass.DONE)
    with journal.session():
        dev = swap_backend.set_up("zram", 32 << 20).device
        with ArenaProcess(lay.arena_bytes, lay.block_bytes) as proc:
            proc.populate(np.arange(lay.n_blocks))
            res0 = measure.Residency.of(proc.pid, proc.address, lay.n_pages, lay.page_bytes)
            assert res0.present.all() and not res0.swapped.any()
            assert proc.madvise(cold, MADVISE_ADVICE["MADV_PAGEOUT"]) == []
            assert proc.madvise(done, MADVISE_ADVICE["MADV_DONTNEED"]) == []
            res = measure.Residency.of(proc.pid, proc.address, lay.n_pages, lay.page_bytes)
            pc = lay.page_class()
            is_cold = pc == CLASSES.index(IntentClass.COLD_SPILLABLE)
            is_done = pc == CLASSES.index(IntentClass.DONE)
            assert res.swapped[is_cold].all() and not res.present[is_cold].any()
            assert not (res.present | res.swapped)[is_done].any()  # dropped, not swapped
            others = ~(is_cold | is_done)
            assert res.present[others].all() and not res.swapped[others].any()
            # the cold pages come back on touch, as major faults (swap-ins)
            f0 = measure.faults(proc.pid)
            proc.touch(cold)
            assert (measure.faults(proc.pid) - f0).major >= cold.size * lay.pages_per_block
            assert measure.Residency.of(proc.pid, proc.address, lay.n_pages, lay.page_bytes).present[is_cold].all()
    assert _leftovers(os.getpid(), [dev]) == []


def test_intent_keeps_decode_critical_resident_when_squeezed(kvds_env: dict[str, str]) -> None:
    lay = make_layout(32 << 20, 64 << 10, mmap.PAGESIZE, DEFAULT_MIX, seed=2)
    with journal.session():
        dev = swap_backend.set_up("zram", 48 << 20).device
        intent = run_once(lay, load_mapping("intent"), 30.0, "t-intent")
        base = run_once(lay, load_mapping("none"), 30.0, "t-none")
    # the placement split holds: protect classes' pages are charged to the unlimited group
    f = intent.facts
    assert f.move_charge_at_immigrate in (None, "0")
    assert abs(f.protect_charged_bytes - f.protect_arena_bytes) < 0.05 * f.protect_arena_bytes
    assert f.limit_error is None and f.squeeze_usage_after_limit <= f.squeeze_limit_bytes
    dc_pages = lay.class_pages()[IntentClass.DECODE_CRITICAL]
    assert intent.residency["after_pressure"]["swapped"][DC] == 0
    assert intent.residency["after_pressure"]["resident"][DC] == dc_pages
    assert intent.faults["decode-critical"]["major"] == 0
    # the squeeze was real: the same budget cost the baseline pages, the intent run cold-class pages
    assert sum(base.residency["after_pressure"]["swapped"]) > 0
    assert intent.residency["after_pressure"]["swapped"][CLASSES.index(IntentClass.COLD_SPILLABLE)] > 0
    assert _leftovers(os.getpid(), [dev]) == []


def test_a_page_left_in_the_spill_child_faults_back_under_the_parents_limit(kvds_env: dict[str, str]) -> None:
    """`kvds vm overcommit`'s memcg split: pages charged to the spill child, swapped out and faulted back while the
    process sits in the critical child, are charged to the spill child again; with the limit on the parent, whose
    subtree holds the process, reclaim makes room in the critical child (two flat groups livelocked this fault in
    a guest). Restore removes both children and the parent."""
    block, n_blocks = 64 << 10, 64
    ppb = block // mmap.PAGESIZE
    spill, critical = np.arange(32), np.arange(32, 64)
    with journal.session():
        dev = swap_backend.set_up("zram", 8 << 20).device
        with journal.scoped():
            budget, placement = create_budget_split("t-split")
            with ArenaProcess(n_blocks * block, block) as proc:
                placement.squeeze.add_pid(proc.pid)
                proc.populate(spill)
                placement.protect.add_pid(proc.pid)
                proc.populate(critical)
                assert proc.madvise(spill, MADVISE_ADVICE["MADV_PAGEOUT"]) == []
                squeezed = int(measure.Residency.of(proc.pid, proc.address, n_blocks * ppb, mmap.PAGESIZE)
                               .swapped[: spill.size * ppb].sum())
                assert squeezed > 0
                placement.set_limit(budget, placement.usage(budget))  # no room left: a swap-in must reclaim
                f0 = measure.faults(proc.pid)
                proc.touch(spill)
                assert proc.alive() and (measure.faults(proc.pid) - f0).major >= squeezed
                res = measure.Residency.of(proc.pid, proc.address, n_blocks * ppb, mmap.PAGESIZE)
                assert res.present[: spill.size * ppb].all()
                assert res.swapped[spill.size * ppb :].sum() > 0  # the room came from the critical child
            assert placement.squeeze.path("memory").parent == budget.path("memory")
    assert _leftovers(os.getpid(), [dev]) == []


def test_bench_cli_restores_swap_zram_zswap_and_cgroups(kvds_env: dict[str, str]) -> None:
    zswap_before = _zswap()
    for swap in ("zram", "zswap"):
        res = run_kvds(["vm", "bench", "--arena-mb", "16", "--reps", "1", "--swap", swap, "--json"], kvds_env)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        s = doc["summary"]
        assert set(s["variants"]) >= {"none", "intent"}
        assert s["headline"]["intent_decode_critical_swapped_out"]["per_rep"] == [0]
        names = os.listdir(Path(doc["run"]) / "samples")
        assert "reaccess_ns__intent__decode-critical__rep0.npy" in names
        if swap == "zswap":
            # zswap really sat in front of the swapfile: its pool statistics were read, and in every repetition the
            # squeeze stored pages in it (pool right after the squeeze; the kernel's zswpout counter moved)
            assert "stored_pages" in s["zswap"]["after"], s["zswap"]
            for name, v in s["variants"].items():
                for rep in v["per_rep"]:
                    assert rep.get("zswap_after_squeeze", {}).get("stored_pages", 0) > 0, (name, rep.get("zswap_after_squeeze"))
                    assert rep["vmstat"]["zswpout"] > 0, (name, rep["vmstat"])
        assert _leftovers(s["pid"], [s["swap"]["device"]]) == [], swap
        assert _zswap() == zswap_before
        assert journals_of(s["pid"]) == []


def test_damon_layer_refuses_here_and_bench_says_why() -> None:
    st = damon.status()
    if st.usable:
        pytest.skip("DAMON is usable on this host: the refusal path does not apply (the guest lab runs DAMOS)")
    nr = (damon.KDAMONDS / "nr_kdamonds").read_text() if damon.KDAMONDS.exists() else None
    lay = make_layout(1 << 20, 64 << 10, mmap.PAGESIZE, DEFAULT_MIX)
    with pytest.raises(Unavailable):
        with journal.scoped():
            damon.start(os.getpid(), damon.plan(load_mapping("intent"), lay, 0x7F0000000000)[0])
    assert ((damon.KDAMONDS / "nr_kdamonds").read_text() if damon.KDAMONDS.exists() else None) == nr
    assert st.reason


def test_mglru_absent_is_skipped_with_reason_or_compared() -> None:
    ok, reason = mglru.available()
    settings, doc = mglru.settings_for("auto", None)
    if ok:
        assert [s.name for s in settings] == ["on", "off"] and doc["status"] == "compared"
    else:
        assert doc == {"status": "skipped", "reason": reason}
        with pytest.raises(Unavailable):
            mglru.settings_for("on", None)


def test_mm_intent_variant_registers_or_is_unavailable_with_the_doctors_reason(kvds_env: dict[str, str]) -> None:
    """Where the kernel lacks the mm_intent registry (this host's), the mm-intent variant is reported unavailable
    with the doctor's reason while the other variants run; alone it is exit 3. Where it has it (the guest lab),
    the variant registered its ranges in one cgroup and cleared them again."""
    cap = doctor.capability("mm_intent")
    assert not cap.is_error, cap.reason
    res = run_kvds(["vm", "bench", "--mapping", "memcg-protect,mm-intent", "--reference", "memcg-protect",
                    "--arena-mb", "8", "--reps", "1", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)["summary"]
    assert s["comparison"]["reference"] == "memcg-protect"
    if cap.ok:
        assert set(s["variants"]) == {"none", "memcg-protect", "mm-intent"}
        rep = s["variants"]["mm-intent"]["per_rep"][0]
        assert rep["mm_intent"]["ranges"] > 0 and rep["mm_intent"]["left_after_clear"] == 0
        assert "protect_charged_bytes" not in rep  # the whole arena in one cgroup: no split
        return
    assert set(s["variants"]) == {"none", "memcg-protect"}
    assert s["comparison"]["unavailable"] == {"mm-intent": f"mm_intent is {cap.status} on this host: {cap.reason}"}
    only = run_kvds(["vm", "bench", "--mapping", "mm-intent", "--arena-mb", "8", "--reps", "1"], kvds_env)
    assert only.returncode == 3 and cap.reason in only.stderr and "Traceback" not in only.stderr, only.stderr
    assert len(only.stderr.strip().splitlines()) == 1


def test_comparison_table_judges_against_the_reference_in_cli_and_report(kvds_env: dict[str, str],
                                                                        tmp_path: Path) -> None:
    """Three repetitions: the comparison carries intervals and verdicts by interval; memcg-protect keeps every
    decode-critical page (met), and `kvds report` renders the same table."""
    res = run_kvds(["vm", "bench", "--mapping", "madvise-only,memcg-protect", "--reference", "memcg-protect",
                    "--arena-mb", "8", "--mix", "decode-critical=20,prefetch-soon=10,warm=25,cold-spillable=25,"
                    "recompute-ok=15,done=5", "--reps", "3", "--json"], kvds_env)  # >= 1,000 decode-critical reads
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    comp = doc["summary"]["comparison"]
    assert comp["reference"] == "memcg-protect" and set(comp["variants"]) == {"none", "madvise-only", "memcg-protect"}
    ref = comp["variants"]["memcg-protect"]
    assert ref["decode_critical_swapped_out"]["per_rep"] == [0, 0, 0]
    assert ref["verdicts"]["decode_critical_swapped_out_zero"]["status"] == "met"
    assert "decode_critical_p99_no_worse_than_reference" not in ref["verdicts"]
    ratio = comp["variants"]["none"]["decode_critical_p99_ratio_over_reference"]
    assert ratio["lo"] is not None and ratio["lo"] <= ratio["value"] <= ratio["hi"]
    rep = run_kvds(["report", doc["run"], "--out", str(tmp_path / "r")], kvds_env, timeout=300)
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "r" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| memcg-protect | 3 |"))
    assert "met (goal decode-critical swapped out <= 0" in row and "(reference)" in row
