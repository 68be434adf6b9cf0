"""The decode-critical p99 comparison against the reference mapping (kernel_vm/paired_p99.py): repetitions paired, a
non-inferiority margin, and the same judgement from a stored run's samples as from the bench's own.

Synthetic samples (no kernel needed): what is tested is the arithmetic of the judgement, which a guest run cannot
exercise deterministically. The drift shape mimics the guest lab's: one TCG repetition 10-100x slower than the next
for every variant alike.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.errors import UserError
from harness.results import ResultStore
from kernel_vm.compare_run import CompareConfig, run as compare_run
from kernel_vm.paired_p99 import MARGIN, p99_vs_reference, stored_samples
from tests.conftest import run_kvds

SCALE = [1, 30, 3, 100, 1, 10, 50, 2, 5, 20, 1, 8]   # per-repetition slowdown shared by every variant


def _reps(seed: int, factor: float = 1.0, k: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(factor * SCALE[r] * 1000 * rng.lognormal(0, 0.3, 2000)).astype(np.int64) for r in range(k)]


def test_a_drift_both_sides_share_cancels_only_when_repetitions_are_paired() -> None:
    ref, same = _reps(1), _reps(2)
    paired = p99_vs_reference({"memcg-protect": ref, "mm-intent": same}, "memcg-protect")["mm-intent"]
    assert paired.verdict.status == "met", paired.verdict      # ratio ~1, interval within the margin
    assert paired.pairs == 8
    # the same repetitions partnered with the wrong repetitions: the drift no longer cancels
    shuffled = p99_vs_reference({"memcg-protect": ref, "mm-intent": same[::-1]}, "memcg-protect")["mm-intent"]
    assert shuffled.verdict.status == "inconclusive", shuffled.verdict


def test_the_margin_decides_met_and_missed() -> None:
    ref = _reps(1)
    within = p99_vs_reference({"r": ref, "v": _reps(2, 1.1)}, "r")["v"]   # worse, yet within
    beyond = p99_vs_reference({"r": ref, "v": _reps(2, 1.6)}, "r")["v"]
    assert within.verdict.status == "met" and f"<= {MARGIN:g}" in within.verdict.goal
    assert beyond.verdict.status == "missed"
    assert "r" not in p99_vs_reference({"r": ref, "v": ref}, "r")   # the reference is not judged against itself


def test_a_stored_run_is_judged_as_its_samples_are(kvds_env: dict[str, str]) -> None:
    """12 repetitions: rep10 and rep11 sort before rep2 by name; pairing must follow the repetition number."""
    data = {"memcg-protect@mglru-off": _reps(1, k=12), "mm-intent@mglru-off": _reps(2, k=12)}
    run = ResultStore().new_run("vm-bench", {"reference": "memcg-protect"})
    for variant, reps in data.items():
        for r, lat in enumerate(reps):
            run.write_samples(f"reaccess_ns__{variant}__decode-critical__rep{r}", lat)
            run.write_samples(f"reaccess_ns__{variant}__warm__rep{r}", lat[:10])
    loaded = stored_samples(run)
    assert all(np.array_equal(a, b) for v in data for a, b in zip(loaded[v], data[v]))
    want = p99_vs_reference(data, "memcg-protect@mglru-off")["mm-intent@mglru-off"].as_dict()
    judged = compare_run(CompareConfig(run.run_id))
    assert judged.run is None   # it files no run
    assert judged.summary.variants["mm-intent@mglru-off"] == want   # the run's own --reference, resolved
    res = run_kvds(["vm", "compare", run.run_id, "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["summary"]["variants"]["mm-intent@mglru-off"]["verdict"]["status"] == \
        want["verdict"]["status"] == "met"


def test_a_gap_in_the_repetitions_is_refused(kvds_env: dict[str, str]) -> None:
    run = ResultStore().new_run("vm-bench", {})
    for r in (0, 2):
        run.write_samples(f"reaccess_ns__none__decode-critical__rep{r}", np.arange(100))
    with pytest.raises(UserError, match="repetition 1"):
        stored_samples(run)
    res = run_kvds(["vm", "compare", run.run_id], kvds_env, timeout=120)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
