"""`kvds vm bench` bad input: one line on stderr, exit 2 (or 3 for a missing mechanism), never a traceback."""

from __future__ import annotations

import pytest

from tests.conftest import needs_root, run_kvds


@pytest.mark.parametrize("args", [
    ["--mix", "warm=50"],
    ["--mix", "decode-critical=x"],
    ["--swap", "floppy"],
    ["--pressure", "100"],
    ["--pressure", "-5"],
    ["--arena-mb", "0"],
    ["--block-kb", "6"],
    ["--mapping", "no-such-mapping"],
    ["--mapping", "none"],
    ["--mglru", "sometimes"],
])
def test_bad_input_exits_2_with_one_line(args: list[str], kvds_env: dict[str, str]) -> None:
    res = run_kvds(["vm", "bench", *args], kvds_env, timeout=60)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


@needs_root
def test_pressure_beyond_the_protected_share_is_refused(kvds_env: dict[str, str]) -> None:
    # 95% pressure leaves 5% resident, less than the intent mapping's protected 20%: refused before any change
    res = run_kvds(["vm", "bench", "--pressure", "95", "--arena-mb", "16"], kvds_env, timeout=60)
    assert res.returncode == 2 and "lower --pressure" in res.stderr


def test_guest_target_says_what_it_waits_on_or_refuses_a_swapfile(kvds_env: dict[str, str]) -> None:
    from kernel_vm.cli import _guest_runner

    if _guest_runner() is None:
        res = run_kvds(["vm", "bench", "--target", "guest"], kvds_env, timeout=60)
        assert res.returncode == 3 and "issue 6" in res.stderr
    else:  # the guest's root is the host's over 9p: no swapfile there, refused before any boot
        res = run_kvds(["vm", "bench", "--target", "guest", "--swap", "swapfile"], kvds_env, timeout=60)
        assert res.returncode == 2 and "zram only" in res.stderr
