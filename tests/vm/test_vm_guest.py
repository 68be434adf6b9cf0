"""`kvds vm bench --target guest`: the bench in the QEMU guest lab kernel (DAMON, MGLRU), results filed home.

A real guest boot (TCG, KASAN+lockdep kernel): a 16 MiB arena, one repetition per variant. Asserts behaviour
only (schemes applied, MGLRU compared, run filed in the local store), never timings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import doctor
from tests.conftest import needs_root, run_kvds


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow  # outside `make test`'s 30-minute budget: run with `make test-slow`
@pytest.mark.timeout(1260)  # ~8-10 min under TCG+KASAN on this loaded 2-core host (see kernel_vm/README.md)
def test_guest_bench_applies_damos_per_class_and_compares_mglru(kvds_env: dict[str, str]) -> None:
    from harness.remote.guest import guest_lab_status

    ready, why = guest_lab_status()
    if not ready:
        pytest.skip(why)
    res = run_kvds(["vm", "bench", "--target", "guest", "--arena-mb", "16", "--reps", "1", "--pressure", "30",
                    "--mglru-min-ttl-ms", "1", "--json"], kvds_env, timeout=1200)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    guest = json.loads(res.stdout)["summary"]["hosts"]["guest"]  # the --json envelope (harness.emit)
    assert guest["status"] == "ok" and len(guest["runs"]) == 1 and guest["runs"][0].endswith("--guest")
    run = Path(kvds_env["KVDS_RESULTS_DIR"]) / guest["runs"][0]
    s = json.loads((run / "summary.json").read_text())
    assert json.loads((run / "meta.json").read_text())["remote"]["host"] == "guest"
    # the figure the guest owed was drawn by the host when it filed the run
    assert (run / "vm-bench.png").stat().st_size > 0 and not (run / "figures-owed.json").exists()

    # MGLRU: both states ran, min_ttl_ms in the on variant
    assert s["mglru"]["status"] == "compared"
    names = set(s["variants"])
    for v in ("none@mglru-on-ttl1", "intent@mglru-on-ttl1", "none@mglru-off", "intent@mglru-off"):
        assert v in names, names

    # DAMON: kvds's own kdamonds applied the mapping's per-class schemes
    assert s["damon"]["status"] == "compared", s["damon"]
    per = s["damon"]["per_class"]
    rc = per["recompute-ok"]
    assert rc["action"] == "pageout" and rc["ops"] == "fvaddr"
    madvise_works = s["damon"]["vaddr_apply"]["status"] == "available"
    for v in rc["variants"].values():
        # without CONFIG_ADVISE_SYSCALLS (the cached guest kernel) vaddr schemes try and cannot apply
        assert v["nr_tried"][0] > 0 and (v["sz_applied"][0] > 0) == madvise_works, (v, s["damon"]["vaddr_apply"])
    dc = per["decode-critical"]
    assert dc["action"] == "lru_prio" and dc["ops"] == "paddr" and dc["memcg_path"].endswith("-protect")
    for v in dc["variants"].values():
        assert v["nr_tried"][0] > 0 and v["sz_applied"][0] > 0
    # what the pageout scheme (or madvise) itself pushed out shows in pagemap after the apply phase
    damos = s["variants"]["intent+damos@mglru-off"]["classes"]
    assert (damos["recompute-ok"]["swapped_out_after_apply"]["per_rep"][0] > 0) == madvise_works
    # per-class placement held in the guest (cgroup2, THP off for the arena): the squeeze took pages
    assert s["variants"]["intent@mglru-off"]["per_rep"][0]["squeeze_charged_bytes"] > 0
    assert "intent_damos_decode_critical_swapped_out" in s["headline"]


GUEST_MIX = "decode-critical=20,prefetch-soon=10,warm=25,cold-spillable=25,recompute-ok=15,done=5"
"""8 MiB arenas with a 20% decode-critical share: ~410 decode-critical pages per repetition, so three repetitions
support a p99 (>= 1,000 samples) in about a third of the 16 MiB run's time under TCG."""


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow  # a guest boot plus two variants under TCG+KASAN: minutes
@pytest.mark.timeout(1860)
def test_guest_mm_intent_keeps_decode_critical_pages_without_a_cgroup_split(kvds_env: dict[str, str]) -> None:
    """The mm-intent variant registers the arena in the guest kernel; with the reclaim consumer (patch 0005) no
    decode-critical page is swapped out although the whole arena sits in the squeezed cgroup, and the consumer's
    counters show it kept pages. Without the consumer the summary says the registry is not read."""
    from harness.remote.guest import guest_lab_status

    ready, why = guest_lab_status()
    if not ready:
        pytest.skip(why)
    res = run_kvds(["vm", "bench", "--target", "guest", "--mapping", "memcg-protect,mm-intent", "--reference",
                    "memcg-protect", "--arena-mb", "8", "--mix", GUEST_MIX, "--reps", "1", "--mglru", "off",
                    "--no-damos", "--json"], kvds_env, timeout=1800)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    guest = json.loads(res.stdout)["summary"]["hosts"]["guest"]  # the --json envelope (harness.emit)
    s = json.loads((Path(kvds_env["KVDS_RESULTS_DIR"]) / guest["runs"][0] / "summary.json").read_text())
    rep = s["variants"]["mm-intent@mglru-off"]["per_rep"][0]
    assert rep["mm_intent"]["ranges"] > 0 and rep["mm_intent"]["left_after_clear"] == 0
    assert "protect_charged_bytes" not in rep and rep["squeeze_arena_bytes"] == 8 << 20  # one cgroup, no split
    assert s["comparison"]["reference"] == "memcg-protect@mglru-off"
    classes = s["variants"]["mm-intent@mglru-off"]["classes"]
    assert sum(c["swapped_out_pages"]["per_rep"][0] for c in classes.values()) > 0  # the squeeze was real
    if s["mm_intent"]["status"] == "consumer":
        assert classes["decode-critical"]["swapped_out_pages"]["per_rep"] == [0]
        assert rep["mm_intent"]["reclaim_stats"]["protected_pages"] > 0
    else:
        assert s["mm_intent"]["status"] == "registry only", s["mm_intent"]
