"""taskstats: a real absence (no such genetlink family, no CAP_NET_ADMIN) is "unavailable" with its reason; any
other failure is kvds's error and raises. Every case asks the running kernel: a family name it lacks, a family
that does not speak taskstats, a name its policy rejects, and a process without CAP_NET_ADMIN (setpriv)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from ebpf.taskstats import TaskstatsClient, family_status
from harness import doctor
from tests.conftest import REPO, needs_tool

# Prints family_status() and the doctor's ebpf.taskstats row, as the process sees them.
ANSWERS = ("import json; from ebpf.taskstats import family_status; from harness import doctor; "
           "c = doctor.capability('ebpf.taskstats', area='ebpf'); "
           "print(json.dumps({'family_status': family_status(), 'doctor': [c.status, c.reason]}))")


@doctor.skip_unless("ebpf.taskstats")
def test_this_host_answers() -> None:
    assert family_status() == (True, "TASKSTATS genetlink family answers TGID queries")


def test_a_family_the_kernel_lacks_is_unavailable_with_the_reason() -> None:
    """The kernel's own ENOENT for a family it does not have (what a CONFIG_TASKSTATS=n kernel answers)."""
    ok, reason = family_status("KVDS_NOFAMILY")
    assert not ok and reason == "the kernel has no KVDS_NOFAMILY generic-netlink family"


@pytest.mark.parametrize("family, code", [("nlctrl", 95), ("KVDS_NAME_TOO_LONG", 22)],
                         ids=["query-not-understood", "bind-rejected"])
def test_any_other_netlink_failure_is_an_error_not_unavailable(family: str, code: int) -> None:
    """A family that does not speak taskstats (the kernel answers EOPNOTSUPP to the query) and a name longer than
    the kernel's GENL_NAMSIZ policy (EINVAL while binding) are kvds talking nonsense: they raise."""
    with pytest.raises(NetlinkError) as e:
        family_status(family)
    assert e.value.code == code


@doctor.skip_unless("ebpf.taskstats", "root")
@needs_tool("setpriv", "drops CAP_NET_ADMIN from a child process")
def test_no_cap_net_admin_is_unavailable_with_the_reason_in_the_doctor_too() -> None:
    """TASKSTATS_CMD_GET is GENL_ADMIN_PERM: a process without CAP_NET_ADMIN is refused (EPERM) by the kernel. That
    is a real absence for that process: family_status and `kvds doctor` say unavailable and why."""
    r = subprocess.run(["setpriv", "--bounding-set=-net_admin", "--inh-caps=-net_admin", sys.executable, "-c", ANSWERS],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    why = "the kernel refuses TASKSTATS queries from this process (Operation not permitted): they need CAP_NET_ADMIN"
    assert got["family_status"] == [False, why]
    assert got["doctor"] == ["unavailable", why]


@doctor.skip_unless("ebpf.taskstats")
def test_a_reaped_process_is_gone_not_an_error() -> None:
    """ESRCH (the process was reaped) is the one query error that means "no record": None, not an exception."""
    p = subprocess.Popen(["true"])
    p.wait()
    with TaskstatsClient() as c:
        assert c.query(p.pid) is None
