"""The guest lab's clock (KVDS_GUEST_CLOCK): parsed once, refused on bad input, recorded with every result."""

from __future__ import annotations

import pytest

from harness import environment
from harness.errors import UserError
from harness.remote.guest import guest_clock, guest_clock_warps
from kernel_vm.render import clock_words
from kernel_vm.summary import VmBenchSummary


def test_guest_clock_values() -> None:
    assert guest_clock("") is None and guest_clock("wall") is None
    assert guest_clock("icount") == 0 and guest_clock("icount:4") == 4 and guest_clock(" icount:10 ") == 10
    assert guest_clock("icount-warp") == 0 and guest_clock("icount-warp:3") == 3
    assert guest_clock_warps("icount-warp:3") and not guest_clock_warps("icount:3") and not guest_clock_warps("wall")


@pytest.mark.parametrize("bad", ["icount:11", "icount:-1", "icount:x", "icount:", "tcg", "wall:1", "icount:1:2",
                                 "icount-warp:11", "warp"])
def test_guest_clock_refuses_bad_values(bad: str) -> None:
    with pytest.raises(UserError, match="KVDS_GUEST_CLOCK"):
        guest_clock(bad)


def test_environment_records_the_clock() -> None:
    assert environment.clock("console=ttyS0 panic=-1") == "wall"
    assert environment.clock("console=ttyS0 kvds.clock=icount:0 rdinit=/init") == "icount:0"
    assert environment.capture()["clock"] == environment.clock()  # this host: whatever its cmdline says


def test_summary_clock_reads_old_runs_as_wall() -> None:
    """Runs from before the field were all measured in real time."""
    assert VmBenchSummary.from_json({}).clock == "wall"
    assert VmBenchSummary.from_json({"clock": "icount:2"}).clock == "icount:2"
    assert clock_words("wall").startswith("wall")
    assert "4 ns" in clock_words("icount:2")


def test_a_bad_guest_clock_is_refused_before_any_host_runs() -> None:
    """One line naming the variable, exit 2: the target is refused when it is parsed, not reported as a failed host."""
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "harness.cli", "vm", "bench", "--target", "guest", "--reps", "1"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "KVDS_GUEST_CLOCK": "icount:x"})
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("kvds: error:") and "KVDS_GUEST_CLOCK" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
