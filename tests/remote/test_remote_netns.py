"""The netns knob: namespaces and veth pairs go through the journal and come back out on restore, also after
the creating process is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from harness import doctor, journal
from harness.errors import KnobRefused
from harness.knobs import create_netns, create_veth
from harness.knobs.netns import _link_exists, namespaces
from harness.paths import repo_root

pytestmark = doctor.skip_unless("root")


def test_netns_and_veth_are_journaled_and_removed() -> None:
    ns, hif = f"kvds-t{os.getpid()}", f"kvt{os.getpid() % 100000}"
    with journal.scoped():
        create_netns(ns)
        create_veth(hif, ns, "t0", "10.250.254.1/30", "10.250.254.2/30")
        assert ns in namespaces() and _link_exists(hif) and _link_exists("t0", ns)
        out = subprocess.run(["ip", "netns", "exec", ns, "ip", "-o", "-4", "addr", "show", "t0"], capture_output=True,
                             text=True, check=True).stdout
        assert "10.250.254.2/30" in out
        with pytest.raises(KnobRefused):
            create_netns(ns)  # an existing name is never taken over (its undo would delete it)
        with pytest.raises(KnobRefused):
            create_veth("lo", ns, "t1", "10.250.254.5/30", "10.250.254.6/30")
    assert ns not in namespaces() and not _link_exists(hif)


def test_kvds_restore_removes_a_killed_process_netns() -> None:
    ns, hif = f"kvds-k{os.getpid()}", f"kvk{os.getpid() % 100000}"
    code = textwrap.dedent(f"""
        import os, signal
        from harness.knobs import create_netns, create_veth
        create_netns({ns!r}); create_veth({hif!r}, {ns!r}, "k0", "10.250.254.9/30", "10.250.254.10/30")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=repo_root())
    assert p.returncode == -signal.SIGKILL
    assert ns in namespaces() and _link_exists(hif)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "restore"], cwd=repo_root(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"created network namespace {ns}" in r.stdout
    assert ns not in namespaces() and not _link_exists(hif)
