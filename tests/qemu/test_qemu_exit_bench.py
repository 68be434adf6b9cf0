"""`kvds qemu exit-bench` on real kernels: the cached debug kernel in `make test`; the base configuration with
and without the series (two new kernel builds) in `make test-slow`. Figures are quoted in the README, not
asserted: these tests check that every state is measured, that boots alternate, and that a kernel without
mm_intent is recognised as the floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.doctor import skip_unless
from qemu_validation import exit_bench_run
from qemu_validation.kernel import build

pytestmark = [skip_unless("qemu.guest"), pytest.mark.timeout(3600)]


def test_exit_bench_on_the_cached_debug_kernel(kernel: build.KernelBuild, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVDS_RESULTS_DIR", str(tmp_path))
    kb = kernel
    filed = exit_bench_run.run(exit_bench_run.ExitBenchConfig(kernels=(kb.id,), iterations=20, reps=1))
    out, run = filed.summary, filed.run
    assert out.ok, out.failure
    (k,) = out.kernels
    assert k["mm_intent"] and k["debug"] and k["boots"] == 1
    assert all(len(k["median_ms"][s]["per_boot"]) == 1 and k["median_ms"][s]["value"] > 0
               for s in exit_bench_run.STATES)
    assert "repetition" in k["median_ms"]["many"]["reason"]           # one boot: a point estimate, said so
    assert out.boots[0]["intents_held"] == exit_bench_run.EXPECTED_HELD and out.comparisons == []
    assert (run.path / "summary.json").exists()
    (boot,) = run.meta["commands"]["qemu_boots"]                     # the QEMU command line that ran
    assert boot["kernel"] == kb.id and boot["rep"] == 1 and str(kb.bzimage) in boot["argv"]


@pytest.mark.slow   # two kernels of a new configuration (base, with and without the series): outside the budget
def test_exit_bench_base_kernels_with_and_without_the_series(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVDS_RESULTS_DIR", str(tmp_path))
    floor = build.ensure_built(build.BuildSpec(patches=(), kasan=False))
    series = build.ensure_built(build.BuildSpec(kasan=False))
    out = exit_bench_run.run(exit_bench_run.ExitBenchConfig(kernels=(floor.id, series.id), iterations=20,
                                                            reps=2)).summary
    assert out.ok, out.failure
    assert [b["kernel"] for b in out.boots] == [floor.id, series.id, series.id, floor.id]   # ABBA
    f, s = out.kernels
    assert not f["mm_intent"] and s["mm_intent"] and not f["debug"] and not s["debug"]
    assert {b["intents_held"] for b in out.boots if b["kernel"] == floor.id} == {0}
    assert [(c["kernel"], c["state"]) for c in out.comparisons] == [(series.id, st) for st in exit_bench_run.STATES]
