"""The newc writer, checked against GNU cpio (the reference reader) and the kernel's layout rules."""

from __future__ import annotations

import stat
import subprocess

import pytest

from qemu_validation.boot import cpio
from tests.conftest import needs_tool


def _archive() -> cpio.Archive:
    a = cpio.Archive()
    a.add_file("init", b"#!/bin/sh\necho hi\n", 0o755)
    a.add_file("bin/tool", bytes(range(256)) * 3 + b"x", 0o755)   # odd length: exercises data padding
    a.add_symlink("bin/sh", "busybox")
    a.add_char_device("dev/console", 5, 1)
    a.add_file("etc/empty", b"")
    return a


def test_round_trip_and_alignment() -> None:
    blob = _archive().to_bytes()
    assert len(blob) % 4 == 0
    names = {n: (m, d) for n, m, d in cpio.parse(blob)}
    assert names["init"][1].startswith(b"#!/bin/sh")
    assert stat.S_ISDIR(names["bin"][0]) and stat.S_ISDIR(names["dev"][0])   # parents added on demand
    assert stat.S_ISLNK(names["bin/sh"][0]) and names["bin/sh"][1] == b"busybox"
    assert stat.S_ISCHR(names["dev/console"][0])
    assert names["bin/tool"][1] == bytes(range(256)) * 3 + b"x"


def test_reproducible() -> None:
    assert _archive().to_bytes() == _archive().to_bytes()


@needs_tool("cpio", "GNU cpio reads the archive back")
def test_gnu_cpio_reads_it(tmp_path) -> None:
    blob = _archive().to_bytes()
    listing = subprocess.run(["cpio", "-t", "-v"], input=blob, capture_output=True, check=True).stdout.decode()
    assert "dev/console" in listing and "bin/sh -> busybox" in listing
    files = subprocess.run(["cpio", "-i", "-d", "--quiet", "init", "bin/tool"], input=blob, cwd=tmp_path,
                           capture_output=True)
    assert files.returncode == 0, files.stderr
    assert (tmp_path / "bin/tool").read_bytes() == bytes(range(256)) * 3 + b"x"
    assert (tmp_path / "init").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("bad", ["", "/", "a/../b", "./x", "a//b"])
def test_rejects_bad_paths(bad: str) -> None:
    with pytest.raises(ValueError):
        cpio.Archive().add_file(bad, b"")


def test_rejects_duplicates() -> None:
    a = cpio.Archive()
    a.add_file("x", b"1")
    with pytest.raises(ValueError):
        a.add_file("x", b"2")
