"""What the paths the mm_intent reference check may not see do to a latency-critical range, per kernel
(qemu_validation/intent_paths.py, guest/intent_paths.c).

DAMOS pageout, virtual and physical: up to Linux 6.8 the folios it isolates pass reclaim's reference check, so a
critical range is kept while the untagged range beside it is paged out; from 6.9 both are paged out. KSM: the
reference check keeps a merged page while every mapping of it is latency-critical, and leaves one with a mapping
outside a critical range to the usual rules (which, in this setting, do not reclaim a page two mappings share
either: so the case reads the check's own count, `stats` protected_pages).
The guest cases are slow (a TCG boot of a debug kernel each, and the 6.8 and KSM kernels are not the default
build); the host case is the program's refusal of a bad case."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.doctor import skip_unless
from qemu_validation import intent_paths
from qemu_validation.boot import guest_programs
from qemu_validation.kernel import build, series_check

KSM_FRAGMENT = Path(__file__).resolve().parents[2] / "qemu_validation" / "kernel" / "configs" / "ksm.config"
PAGES = intent_paths.PAGES


def test_an_unknown_case_is_refused_before_anything_is_set_up() -> None:
    for bad in ("pageout", "ksmx"):
        p = subprocess.run([str(guest_programs.static_binary(intent_paths.SOURCE)), bad], capture_output=True,
                           text=True)
        assert p.returncode == 2 and f"unknown case {bad}" in p.stderr and p.stdout == ""


def test_the_kernel_boundary_is_6_9() -> None:
    assert intent_paths.pageout_keeps_critical("6.8.0")
    assert not intent_paths.pageout_keeps_critical("6.12.57+deb13-amd64")
    with pytest.raises(ValueError):
        intent_paths.pageout_keeps_critical("unknown")


def _run(kb: build.KernelBuild, cases: tuple[str, ...], share: Path) -> dict[str, dict[str, str | int]]:
    got = intent_paths.run(kb.id, cases, share)
    assert got.boot.ok and not got.failed, (got.boot.failure, got.failed, got.stderr)
    assert set(got.cases) >= set(cases), got.cases
    return got.cases


def _kernel(kind: str) -> build.KernelBuild:
    if kind == "6.8":
        tarball = series_check.SOURCES["linux-6.8"]
        if not tarball.is_file():
            pytest.skip(f"vanilla Linux 6.8 tarball {tarball} is not on this machine")
        return build.ensure_built(build.BuildSpec(source=str(tarball), kasan=True))
    return build.ensure_built(build.BuildSpec(kasan=True))


@pytest.mark.slow
@skip_unless("qemu.guest")
@pytest.mark.parametrize("kind", ["6.12", "6.8"])
def test_damos_pageout_keeps_a_critical_range_up_to_6_8_only(tmp_path: Path, kind: str) -> None:
    cases = _run(_kernel(kind), ("damos-vaddr", "damos-paddr"), tmp_path)
    for name in ("damos-vaddr", "damos-paddr"):
        c = cases[name]
        assert c["untagged_swapped"] == PAGES, c
        if intent_paths.pageout_keeps_critical(str(c["release"])):
            assert c["critical_present"] == PAGES and c["critical_swapped"] == 0, c
        else:
            assert c["critical_swapped"] == PAGES, c


@pytest.mark.slow
@skip_unless("qemu.guest")
def test_the_reference_check_keeps_a_ksm_page_only_when_every_mapping_is_critical(tmp_path: Path) -> None:
    kb = build.ensure_built(build.BuildSpec(kasan=True, fragments=(KSM_FRAGMENT,)))
    c = _run(kb, ("ksm", "ksm-one-critical"), tmp_path)
    for name in ("ksm", "ksm-one-critical"):
        assert c[f"{name}-merged"]["pages_sharing"] >= 2 * PAGES, c
        assert c[name]["untagged_swapped"] == PAGES, c[name]  # reclaim ran and took what it could
    both, one = c["ksm"], c["ksm-one-critical"]
    # every mapping critical: kept by the reference check, and resident
    assert both["kept_by_intents"] > 0, both
    assert both["merged_a_present"] == PAGES and both["merged_b_present"] == PAGES, both
    # one mapping critical, the other not: the reference check keeps none of those pages (usual rules)
    assert one["kept_by_intents"] == 0, one
