"""The device safety check refuses the root disk, a mounted device, and data without consent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import doctor, journal
from harness.errors import UserError
from harness.knobs import create_dir, create_file, loop_attach, mount
from harness.paths import work_dir
from io_priority import device

root_only = doctor.skip_unless("root")


@pytest.mark.skipif(not Path("/dev/vda").exists(), reason="this host has no /dev/vda")
def test_refuses_root_disk_even_with_consent() -> None:
    for consent in (False, True):
        with pytest.raises(UserError, match="root filesystem"):
            device.check_block_device("/dev/vda", destroy_data=consent)


@root_only
@doctor.skip_unless("loop")
def test_refuses_mounted_device_and_filesystem_without_consent(tmp_path: Path) -> None:
    with journal.session():
        d = create_dir(work_dir() / f"test-io-dev-{os.getpid()}")
        img = create_file(d / "fs.img", 16 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
        dev = loop_attach(img)
        target = create_dir(d / "mnt")
        mount("ext4", str(target), source=dev)
        with pytest.raises(UserError, match="mounted"):
            device.check_block_device(dev, destroy_data=True)
        subprocess.run(["umount", str(target)], check=True)
        with pytest.raises(UserError, match="ext4 signature"):
            device.check_block_device(dev)
        device.check_block_device(dev, destroy_data=True)  # consented, unmounted: allowed


@root_only
@doctor.skip_unless("loop")
def test_free_blank_device_is_accepted() -> None:
    with journal.session():
        d = create_dir(work_dir() / f"test-io-blank-{os.getpid()}")
        dev = loop_attach(create_file(d / "blank.img", 8 << 20))
        device.check_block_device(dev)


def test_existing_file_needs_consent(tmp_path: Path) -> None:
    f = tmp_path / "data.img"
    f.write_bytes(b"x" * 4096)
    with pytest.raises(UserError, match="--destroy-data"):
        device.check_file(str(f))
    device.check_file(str(f), destroy_data=True)
    device.check_file(str(tmp_path / "new.img"))


def test_cli_refuses_vda_in_one_line() -> None:
    if not Path("/dev/vda").exists():
        pytest.skip("this host has no /dev/vda")
    res = subprocess.run([sys.executable, "-m", "harness.cli", "io", "bench", "--device", "/dev/vda", "--duration",
                          "0.5", "--reps", "1"], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "root filesystem" in res.stderr
