"""Reclaim counts a mapping's intent only where the rmap walk found the folio mapped (mm_intent 0005), and the
deliberately broken variant (kernel_patches/broken-rmap-count) that counts every VMA the walk visits is caught.

Fast: the variant, applied with `git am` on top of the series, is exactly the old unconditional call. Slow (builds
and boots two debug kernels; run under /tmp/kvds-kernel.lock): the series' kselftests for fork with copy on write
and for a shared file mapped by a process that never touched it pass on the series and fail on the variant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qemu_validation.boot import ktap
from qemu_validation.kernel import build, series_check

SERIES = sorted(build.series_dir("mm_intent").glob("*.patch"))
VARIANT = sorted(build.series_dir("broken-rmap-count").glob("*.patch"))
RMAP_TESTS = ("fork_child_keeps_critical_pages_its_parent_copied",
              "shared_file_pages_stay_when_another_mapper_never_touched_them")
# The walk notes intents only for folio_referenced_intent() (pra->intent set), and only where it found the folio.
GUARDED = re.compile(r"if \(pra->intent && pra->mapcount != mapcount\)\n\t\tmm_intent_folio_mapping\(")
UNGUARDED = re.compile(r"if \(pra->intent\)\n\t\tmm_intent_folio_mapping\(pra->intent, vma, start, folio\);")


def _folio_referenced_one(tree: Path) -> str:
    text = (tree / "mm" / "rmap.c").read_text()
    start = text.index("static bool folio_referenced_one(")
    return text[start:text.index("\n}\n", start)]


def test_the_variant_restores_the_unconditional_count(tmp_path: Path) -> None:
    tree, _ = series_check.git_am(series_check.SOURCES["debian-6.12"], SERIES, tmp_path / "fixed")
    fixed = _folio_referenced_one(tree)
    assert GUARDED.search(fixed) and not UNGUARDED.search(fixed)
    tree, _ = series_check.git_am(series_check.SOURCES["debian-6.12"], SERIES + VARIANT, tmp_path / "broken")
    broken = _folio_referenced_one(tree)
    assert UNGUARDED.search(broken) and not GUARDED.search(broken)


def _run_rmap_kselftests(patches: tuple[str, ...], share: Path) -> ktap.Report:
    from qemu_validation import validate_run
    from qemu_validation.boot import guest_command
    kb = build.ensure_built(build.BuildSpec(patches=patches, kasan=True))
    binary = validate_run.kselftest_binary(kb)
    filters = " ".join(f"-t {name}" for name in RMAP_TESTS)
    argv = ["sh", "-c", f"/bin/mm_intent_kselftest {filters} > /share/out.txt 2>&1"]
    res = guest_command.boot_and_run(kb.id, argv, share, files={"bin/mm_intent_kselftest": binary}, timeout=1200)
    assert not res.timed_out and not res.findings, res
    return ktap.parse((share / "out.txt").read_text(errors="replace"))


@pytest.mark.slow
@pytest.mark.parametrize("patches, passes", [(("mm_intent",), True), (("mm_intent", "broken-rmap-count"), False)])
def test_rmap_kselftests_pass_on_the_series_and_fail_on_the_variant(tmp_path: Path, patches: tuple[str, ...],
                                                                    passes: bool) -> None:
    report = _run_rmap_kselftests(patches, tmp_path)
    assert report.complete and len(report.results) == len(RMAP_TESTS), report
    assert report.skipped == 0, [r.reason for r in report.results]
    assert report.passed == (len(RMAP_TESTS) if passes else 0), [(r.name, r.diagnostics) for r in report.results]
