"""The three mechanism experiments for real: `kvds vm churn` on this host (madvise and mlock calls, seconds), and
`kvds vm lazy`, `kvds vm churn`, `kvds vm overcommit` in the QEMU guest lab (a TCG boot each: slow). Behaviour
only (what was written, what was called, what was kept), never timings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import doctor
from kernel_vm import churn
from tests.conftest import needs_root, run_kvds


def _guest(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    from harness.remote.guest import guest_lab_status

    ready, why = guest_lab_status()
    if not ready:
        pytest.skip(why)
    res = run_kvds([*argv, "--target", "guest", "--json"], env, timeout=timeout)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    guest = json.loads(res.stdout)["summary"]["hosts"]["guest"]
    return json.loads((Path(env["KVDS_RESULTS_DIR"]) / guest["runs"][0] / "summary.json").read_text())


def _rows(s: dict[str, Any], key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in s["rows"]}


@needs_root  # mlock(2) of the arena
def test_churn_makes_exactly_the_planned_madvise_and_mlock_calls(kvds_env: dict[str, str]) -> None:
    argv = ["--blocks", "256", "--requests", "16", "--batch", "4", "--steps", "12", "--lifetime", "8", "--reps", "1"]
    res = run_kvds(["vm", "churn", "--mechanisms", "madvise,mlock", *argv, "--json"], kvds_env)
    assert res.returncode == 0, res.stderr[-2000:]
    s = json.loads(res.stdout)["summary"]
    rows = _rows(s, "mechanism")
    plan = churn.binary_steps(churn.Workload(256, 4096, 16, 4, 12, 8), "madvise")
    for name in ("madvise", "mlock"):
        assert rows[name]["calls_per_step"]["per_rep"] == [pytest.approx(sum(map(len, plan)) / len(plan))]
        assert rows[name]["errors"] == [] and rows[name]["cpu_us_per_step"]["per_rep"][0] > 0
    assert rows["mlock"]["verdicts"]["calls_fewer"]["status"] == "inconclusive"  # one repetition: no interval
    assert s["intent_ranges"] == 16 and "mm-intent" not in rows


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow  # a TCG+KASAN guest boot: minutes
@pytest.mark.timeout(1260)
def test_guest_churn_rewrites_the_registration_only_when_a_request_finishes(kvds_env: dict[str, str]) -> None:
    s = _guest(["vm", "churn", "--blocks", "256", "--requests", "16", "--batch", "4", "--steps", "12",
                "--lifetime", "8", "--reps", "1"], kvds_env, 1200)
    rows = _rows(s, "mechanism")
    w = churn.Workload(256, 4096, 16, 4, 12, 8)
    updates = churn.intent_update_steps(w)
    # step 0: 16 register lines; each later update: clear + 16 lines
    expect = (16 + 17 * (sum(updates) - 1)) / len(updates)
    assert rows["mm-intent"]["calls_per_step"]["per_rep"] == [pytest.approx(expect)]
    assert rows["mm-intent"]["errors"] == [] and rows["madvise"]["errors"] == []


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow
@pytest.mark.timeout(1860)
def test_guest_lazy_madvise_pageout_writes_without_pressure_and_an_intent_does_not(kvds_env: dict[str, str]) -> None:
    s = _guest(["vm", "lazy", "--mapping", "madvise-only,mm-intent", "--pressures", "0,30", "--arena-mb", "4",
                "--reps", "1"], kvds_env, 1800)
    rows = {(r["mapping"], r["pressure_pct"]): r for r in s["rows"]}
    eager, lazy = rows[("madvise-only", 0.0)], rows[("mm-intent", 0.0)]
    recompute = s["class_pages"]["recompute-ok"] * s["page_bytes"]
    assert eager["written_in_apply_bytes"]["per_rep"][0] >= recompute  # PAGEOUT wrote its blocks, no pressure
    assert lazy["written_bytes"]["per_rep"] == [0.0]                     # nothing asked reclaim to run
    assert eager["refaults"]["per_rep"][0] > 0 and lazy["refaults"]["per_rep"] == [0.0]
    assert rows[("mm-intent", 30.0)]["written_bytes"]["per_rep"][0] > 0  # under pressure the intent's pages go
    assert rows[("mm-intent", 30.0)]["decode_critical_swapped_out"]["per_rep"] == [0.0]


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow
@pytest.mark.timeout(1860)
def test_guest_overcommit_mlock_ooms_memcg_takes_critical_pages_and_intents_yield_farthest_first(
        kvds_env: dict[str, str]) -> None:
    s = _guest(["vm", "overcommit", "--mechanisms", "memcg,mlock,mm-intent", "--arena-mb", "8", "--reps", "1"],
               kvds_env, 1800)
    rows = _rows(s, "mechanism")
    assert rows["mlock"]["killed"] == [True]  # the limit cannot be met with every critical block locked
    memcg = rows["memcg"]
    assert memcg["killed"] == [False]
    assert memcg["limit_write_interrupted"] == [False]  # reclaim met the limit: the write returned on its own
    assert sum(t["per_rep"][0] for t in memcg["swapped_pages"][:-1]) > 0  # critical pages had to go
    intent = rows["mm-intent"]
    if "yielded_pages" in intent["intent_stats"] or not intent["killed"][0]:
        # a kernel whose reclaim lets critical ranges yield: the farthest deadline first, the nearest kept
        assert intent["killed"] == [False] and intent["intent_stats"]["yielded_pages"] > 0
        assert intent["swapped_pages"][0]["per_rep"][0] > 0 and intent["swapped_pages"][3]["per_rep"] == [0.0]
    else:  # critical ranges never yield: beyond the budget the memcg OOM killer, as with mlock
        assert intent["killed"] == [True]
