"""The `--target guest` timeout follows the command's plan: a command whose parser states what its plan needs (e2e:
steps x repetitions x cells) gets that when it is more than the default, `--guest-timeout` overrides both, and a
command without a plan keeps the default."""
from __future__ import annotations

import subprocess

from harness.cli import build_parser
from harness.remote.guest import GUEST_TIMEOUT_S, guest_timeout
from e2e.e2e_run import guest_seconds
from tests.conftest import KVDS, REPO


def _args(*argv: str):
    return build_parser().parse_args(list(argv))


def test_the_goal_configuration_gets_the_time_its_plan_needs() -> None:
    need = guest_seconds(2000, 5, 1)
    assert need > GUEST_TIMEOUT_S
    assert guest_timeout(_args("e2e", "--target", "guest")) == need          # the defaults: 2,000 steps x 5
    assert guest_timeout(_args("e2e", "--target", "guest", "--steps", "4000")) == guest_seconds(4000, 5, 1)
    assert guest_timeout(_args("e2e", "--target", "guest", "--steps", "20", "--reps", "1")) == GUEST_TIMEOUT_S
    assert guest_timeout(_args("e2e", "--target", "guest", "--guest-timeout", "99")) == 99.0


def test_a_command_without_a_plan_keeps_the_default() -> None:
    assert guest_timeout(_args("remote", "baseline", "--target", "guest")) == GUEST_TIMEOUT_S


def test_a_bad_guest_timeout_is_one_line_exit_2() -> None:
    res = subprocess.run([*KVDS, "e2e", "--target", "guest", "--guest-timeout", "forever"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "'forever' is not a number of seconds" in res.stderr
