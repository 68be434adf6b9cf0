"""The mm_intent series as a kernel developer checks it, without building a kernel: `git am` onto the files it
touches from vanilla Linux 6.8 and from Debian's 6.12, each broken variant on top, checkpatch --strict clean, and
the validator's reference model in agreement with the kernel's own errno table (mm/mm_intent_kunit.c)."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest

from qemu_validation import validate_run

from qemu_validation.kernel import build, errno_table, series_check

SERIES = sorted(build.series_dir("mm_intent").glob("*.patch"))
VARIANTS = ("broken-uaf", "broken-lockdep", "broken-leak", "broken-lockkey", "broken-rmap-count")


def _tarball(name: str) -> Path:
    t = series_check.SOURCES[name]
    if not t.is_file():
        pytest.skip(f"{name} source tarball {t} is not on this machine")
    return t


@pytest.mark.parametrize("source", sorted(series_check.SOURCES))
def test_series_and_variants_git_am_cleanly(source: str, tmp_path: Path) -> None:
    tarball = _tarball(source)
    tree, subjects = series_check.git_am(tarball, SERIES, tmp_path)
    assert subjects == [kernel_table_subject(p) for p in SERIES]
    assert (tree / "mm" / "mm_intent.c").is_file() and (tree / "include/uapi/linux/mm_intent.h").is_file()
    assert "mm_intent" in (tree / "MAINTAINERS").read_text()
    for variant in VARIANTS:
        for p in sorted(build.series_dir(variant).glob("*.patch")):
            r = subprocess.run(["git", "apply", "--check", str(p)], cwd=tree, capture_output=True, text=True)
            assert r.returncode == 0, (variant, r.stderr)


def kernel_table_subject(patch: Path) -> str:
    """The mail's Subject without its [PATCH n/m] tag, unfolded as git am reads it."""
    head = patch.read_text().split("\n\n", 1)[0].replace("\n ", " ")
    subject = next(l for l in head.splitlines() if l.startswith("Subject:"))
    return subject.split("] ", 1)[1]


def test_series_is_checkpatch_strict_clean(tmp_path: Path) -> None:
    tree, _ = series_check.git_am(_tarball("debian-6.12"), SERIES, tmp_path)
    assert series_check.checkpatch(tree, SERIES) == ""
    # the check can fail: trailing whitespace added to a copy of the first patch is reported
    bad = tmp_path / "bad.patch"
    bad.write_text(SERIES[0].read_text().replace("+#define MM_INTENT_FIELDS\t6\n", "+#define MM_INTENT_FIELDS\t6 \n"))
    assert "trailing whitespace" in series_check.checkpatch(tree, [bad])


def test_validator_model_agrees_with_the_kernel_table(tmp_path: Path) -> None:
    """The validator's model (what its random lines are judged by) against the kernel's table, on the host."""
    kunit = next(p for p in SERIES if f"+++ b/{errno_table.KUNIT_FILE}" in p.read_text())
    rows = errno_table.rows(errno_table.from_patch(kunit.read_text()))
    codes = {e for _, e in rows}
    assert {0, errno.EBADMSG, errno.EINVAL, errno.EOPNOTSUPP, errno.ERANGE, errno.EDOM} <= codes
    table = tmp_path / "table.txt"
    table.write_text(errno_table.to_file(rows))
    binary = validate_run.validator_binary()
    ok = subprocess.run([str(binary), "--check-table", str(table)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    # a row with the wrong errno is caught
    line, err = next((l, e) for l, e in rows if e == errno.EDOM)
    table.write_text(errno_table.to_file([(line, errno.ERANGE)]))
    bad = subprocess.run([str(binary), "--check-table", str(table)], capture_output=True, text=True)
    assert bad.returncode == 1 and "model disagrees" in bad.stdout


def test_c_string_literals() -> None:
    assert errno_table.c_string(r"a\n\t\x01\\\"\0") == b'a\n\t\x01\\"\x00'
    src = 'mm_intent_parse_cases[] = {\n\t{ "1 " "2\\n", -EINVAL },\n\t{ "", 0 },\n};'
    assert errno_table.rows(src) == [(b"1 2\n", errno.EINVAL), (b"", 0)]
