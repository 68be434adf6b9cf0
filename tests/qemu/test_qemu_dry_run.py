"""The command underneath: `kvds qemu run --dry-run` prints the QEMU command line a run would start and changes
nothing; `--verbose` prints it before a real run, and the run reports the command it started: the same one."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.doctor import skip_unless
from qemu_validation.boot import guest_command
from qemu_validation.kernel import build

pytestmark = [skip_unless("qemu.guest"), pytest.mark.timeout(3600)]
KVDS = [sys.executable, "-m", "harness.cli"]


def _serial_dir(argv: list[str]) -> str:
    """The log directory of a QEMU argv: where -serial writes the console."""
    return str(Path(argv[argv.index("-serial") + 1].removeprefix("file:")).parent)


def test_dry_run_prints_the_command_a_run_starts_and_changes_nothing(kernel: build.KernelBuild,
                                                                     tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir()
    run = ["qemu", "run", "--kernel", kernel.id, "--share", str(share), "--append", "kvds.test=1"]
    dry = subprocess.run([*KVDS, *run, "--dry-run", "--json", "--", "sh", "-c", "exit 4"], capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["run"] is None and doc["summary"]["guest_argv"] == ["sh", "-c", "exit 4"]
    planned = doc["summary"]["qemu_argv"]
    assert str(kernel.bzimage) in planned and "kvds.test=1" in planned[planned.index("-append") + 1].split()
    assert not Path(_serial_dir(planned)).exists() and list(share.iterdir()) == []  # nothing written, nothing run

    real = subprocess.run([*KVDS, *run, "--verbose", "--json", "--", "sh", "-c", "exit 4"], capture_output=True,
                          text=True, timeout=900)
    assert real.returncode == 4, real.stderr
    ran = json.loads(real.stdout)["summary"]["qemu_argv"]
    announced = next(ln for ln in real.stderr.splitlines() if ln.startswith("Running with: $ "))
    assert shlex.split(announced.removeprefix("Running with: $ ")) == planned
    log_dir = _serial_dir(ran)
    assert ran == [a.replace(_serial_dir(planned), log_dir) for a in planned]
    assert (Path(log_dir) / "console.log").exists()


def test_dry_run_shows_the_icount_clock(kernel: build.KernelBuild) -> None:
    """`--icount N` is one QEMU flag and one command-line word naming the clock (what a kvds inside records)."""
    dry = subprocess.run([*KVDS, "qemu", "run", "--kernel", kernel.id, "--icount", "2", "--dry-run", "--json", "--",
                          "true"], capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    argv = json.loads(dry.stdout)["summary"]["qemu_argv"]
    assert argv[argv.index("-icount") + 1] == "shift=2,align=off,sleep=on"
    append = argv[argv.index("-append") + 1].split()
    assert "kvds.clock=icount:2" in append and "tsc_early_khz=1000000" in append
