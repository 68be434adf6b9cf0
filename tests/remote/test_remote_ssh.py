"""Real SSH hosts in network namespaces (pyroute2 veth pairs, one Debian sshd each): host-key rules, a
two-host run whose results come home tagged, and a host killed mid-run.

The hosts' kvds roots live in the kvds cache (cache_dir()/remote-lab) so their venvs survive between test
sessions: the first session installs the dependencies on each host (a minute or two on a busy machine). The
first session also downloads the dependency wheels once into the local cache (from the package index, by this
machine, as setup.sh does); the test hosts themselves reach only this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness import doctor, journal
from harness.knobs.netns import _link_exists, namespaces
from harness.paths import cache_dir, repo_root
from harness.remote.netns_hosts import SSHD, NetnsLab
from tests.conftest import needs_tool
from tests.remote.conftest import kvds

pytestmark = [doctor.skip_unless("root"),
              needs_tool(SSHD, "the lab runs openssh-server in a network namespace")]


@pytest.fixture(scope="module")
def lab():
    with journal.scoped():
        with NetnsLab(2, roots_dir=cache_dir() / "remote-lab") as lab:
            yield lab
    for h in lab.hosts:  # torn down through the journal: namespaces, veth pairs and the lab directory are gone
        assert h.netns not in namespaces()
        assert not _link_exists(f"kvl{lab.token}h{lab.hosts.index(h)}")
    assert not lab.dir.exists()


@pytest.fixture(scope="module")
def known(lab, tmp_path_factory) -> Path:
    """known_hosts with both lab hosts accepted (what a user does once with --accept-new-host-key)."""
    store = tmp_path_factory.mktemp("accept")
    r = kvds("remote", "hosts", "--check", "--hosts", str(lab.hosts_file()), "--known-hosts", str(lab.known_hosts),
             "--accept-new-host-key", store=store)
    assert r.returncode == 0, r.stdout + r.stderr
    return lab.known_hosts


def test_host_keys_known_hosts_rules(lab, tmp_path: Path) -> None:
    hosts = str(lab.hosts_file())
    kh = tmp_path / "known_hosts"
    r = kvds("remote", "hosts", "--check", "--json", "--hosts", hosts, "--known-hosts", str(kh), store=tmp_path)
    rows = json.loads(r.stdout)["summary"]["hosts"]
    assert r.returncode == 1 and all(x["status"] == "failed" and "not in" in x["detail"] for x in rows)
    assert not kh.exists()  # refusing records nothing
    r = kvds("remote", "hosts", "--check", "--json", "--hosts", hosts, "--known-hosts", str(kh),
             "--accept-new-host-key", store=tmp_path)
    rows = json.loads(r.stdout)["summary"]["hosts"]
    assert r.returncode == 0 and all(x["status"] == "ok" for x in rows)
    assert all(any("accepted new host key" in e for e in x["events"]) for x in rows)
    lines = kh.read_text().splitlines()
    assert sorted(ln.split()[0] for ln in lines) == sorted(h.address for h in lab.hosts)
    r = kvds("remote", "hosts", "--check", "--json", "--hosts", hosts, "--known-hosts", str(kh), store=tmp_path)
    assert r.returncode == 0 and all(not x["events"] for x in json.loads(r.stdout)["summary"]["hosts"])
    # a changed key (lab0's line carrying lab1's key) is refused even with --accept-new-host-key
    keys = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines}
    a, b = lab.hosts[0].address, lab.hosts[1].address
    kh.write_text(f"{a} {keys[b]}\n")
    r = kvds("remote", "hosts", "--check", "--json", "--target", lab.hosts[0].target(), "--identity",
             str(lab.client_key), "--known-hosts", str(kh), "--accept-new-host-key", store=tmp_path)
    row = json.loads(r.stdout)["summary"]["hosts"][0]
    assert r.returncode == 1 and "CHANGED" in row["detail"]


def test_two_hosts_doctor_and_experiment_tagged(lab, known, tmp_path: Path) -> None:
    store = tmp_path / "results"
    r = kvds("remote", "baseline", "--duration", "1", "--file-mib", "8", "--hosts", str(lab.hosts_file()),
             "--known-hosts", str(known), store=store)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    head = next(ln for ln in r.stdout.splitlines() if "lab0" in ln and "lab1" in ln)  # side by side, one column each
    assert head.index("lab0") < head.index("lab1")
    assert any(ln.lstrip("│┃ ").startswith("host-baseline: pread_direct_4k.p99_us") for ln in r.stdout.splitlines())
    record = Path(next(ln for ln in r.stdout.splitlines() if ln.startswith("invocation record:")).split(": ", 1)[1])
    outcomes = json.loads((record / "summary.json").read_text())["hosts"]
    for h in lab.hosts:
        o = outcomes[h.tag]
        assert o["status"] == "ok" and o["exit_status"] == 0, o
        caps = json.loads((record / "hosts" / h.tag / "doctor.json").read_text())
        assert any(c["name"] == "ioprio" for c in caps)
        assert len(o["runs"]) == 1 and o["runs"][0].endswith(f"--{h.tag}")
        run = store / o["runs"][0]
        meta = json.loads((run / "meta.json").read_text())
        assert meta["kind"] == "host-baseline"
        assert meta["remote"]["host"] == h.tag and meta["remote"]["partial"] is False
        assert meta["config"]["work_dir"] == str(h.root / "work")  # ran with this host's own directories
        samples = np.load(run / "samples" / "pread_direct_4k_ns.npy")
        assert samples.size > 0 and samples.min() > 0
        assert not any((h.root / "state" / "journal").glob("*.jsonl"))  # the host restored its own changes
    # nothing secret in what was stored: the client key's material appears nowhere
    secret = "".join(ln for ln in lab.client_key.read_text().splitlines() if "PRIVATE KEY" not in ln)[10:60]
    for p in store.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".txt"):
            assert secret not in p.read_text(errors="replace")


def test_host_killed_mid_run(lab, known, tmp_path: Path) -> None:
    store = tmp_path / "results"
    store.mkdir()
    keep = store / "earlier-run"
    keep.mkdir()
    (keep / "meta.json").write_text('{"kind": "earlier", "run_id": "earlier-run", "config": {}, "environment": {}}')
    victim, survivor = lab.hosts
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "remote", "baseline", "--duration", "8", "--file-mib",
                             "8", "--hosts", str(lab.hosts_file()), "--known-hosts", str(known), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=repo_root(),
                            env={**os.environ, "KVDS_RESULTS_DIR": str(store), "KVDS_NO_PROGRESS": "1"})
    journals = victim.root / "state" / "journal"
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        if any("baseline-" in j.read_text() for j in journals.glob("*.jsonl")) and \
                any((victim.root / "results").glob("*/*/meta.json")):
            break  # the victim's kvds is mid-experiment: its run is recorded, its scratch directory journaled
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the victim never started its experiment: " + proc.communicate()[1][-2000:])
    killed = lab.kill_sshd(victim)
    assert len(killed) >= 3  # listener, session, remote kvds
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 1, err[-2000:]
    doc = json.loads(out)
    v, s = doc["summary"]["hosts"][victim.tag], doc["summary"]["hosts"][survivor.tag]
    assert v["status"] == "failed" and "connection lost" in v["reason"] and v["stage"] == "run"
    assert s["status"] == "ok" and len(s["runs"]) == 1
    assert np.load(store / s["runs"][0] / "samples" / "anon_first_touch_ns.npy").size > 0
    assert json.loads((keep / "meta.json").read_text())["kind"] == "earlier"  # nothing local lost
    summary = json.loads((Path(doc["run"]) / "summary.json").read_text())
    assert summary["hosts"][victim.tag]["status"] == "failed"
    scratch = list((victim.root / "work").glob("baseline-*"))
    assert scratch and any(journals.glob("*.jsonl"))  # the killed kvds left its change and journal behind

    # The host comes back: the next connection runs `kvds restore` there and fetches the partial run.
    lab.start_sshd(victim)
    single = tmp_path / "victim-hosts"
    single.write_text(lab.hosts_file().read_text().splitlines()[0] + "\n")
    r = kvds("remote", "doctor", "--hosts", str(single), "--known-hosts", str(known), "--json", store=store)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-3000:]
    again = json.loads(r.stdout)["summary"]["hosts"][victim.tag]
    assert any("created directory" in x and "baseline-" in x for x in again["restored"])
    assert any("kvds restore on connect" in e for e in again["events"])
    assert not any(p.exists() for p in scratch) and not any(journals.glob("*.jsonl"))
    assert len(again["partial_runs"]) == 1
    part = json.loads((store / again["partial_runs"][0] / "remote.json").read_text())
    assert part["partial"] is True and part["host"] == victim.tag
