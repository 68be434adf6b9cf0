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


def test_vm_bench_takes_the_uniform_target_options(kvds_env: dict[str, str]) -> None:
    """`--target`/`--hosts` come from harness.remote (one guest path); a malformed target is one line, exit 2."""
    from harness.cli import build_parser
    from harness.remote.args import strip_target_argv

    argv = ["vm", "bench", "--arena-mb", "8", "--target", "guest", "--hosts", "f"]
    args = build_parser().parse_args(argv)
    assert args.remote_opt_in and args.target == ["guest"] and args.hosts == "f"
    assert strip_target_argv(argv) == ["vm", "bench", "--arena-mb", "8"]
    res = run_kvds(["vm", "bench", "--target", "ftp://nowhere"], kvds_env, timeout=60)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
