"""The series on vanilla Linux 6.8, the design's kernel: a cold build from the tarball, boot, and the full
validate (KASAN + lockdep + kmemleak, KUnit, kselftest). About a quarter of an hour of compiling on 2 cores,
so it belongs to `make test-slow`; `make test` checks that the series applies to 6.8 (tests/qemu/test_qemu_series.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.doctor import skip_unless
from qemu_validation import validate_run
from qemu_validation.kernel import build, series_check

pytestmark = [pytest.mark.slow, skip_unless("qemu.guest"), pytest.mark.timeout(7200)]


def test_linux_68_builds_boots_and_validates(tmp_path: Path) -> None:
    from harness.results import ResultStore
    tarball = series_check.SOURCES["linux-6.8"]
    if not tarball.is_file():
        pytest.skip(f"vanilla Linux 6.8 tarball {tarball} is not on this machine")
    kb = build.ensure_built(build.BuildSpec(source=str(tarball), kasan=True))
    assert kb.info["kernel_release"].startswith("6.8.0")
    assert set(kb.info["options_not_in_source"]) <= {"CONFIG_SLUB_RCU_DEBUG=y", "CONFIG_ZRAM_BACKEND_LZO=y"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVDS_RESULTS_DIR", str(ResultStore(tmp_path).root))
        validated = validate_run.run(validate_run.ValidateConfig(kernel=kb.id)).summary
    summary = validated.as_dict()
    assert summary["ok"], json.dumps(summary, indent=1)[:3000]
    assert summary["kselftest"]["failed"] == 0 and summary["kunit"]["failed"] == 0
    assert summary["kmemleak_leaks"] == 0 and summary["splats"] == 0
