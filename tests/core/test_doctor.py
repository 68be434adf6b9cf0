"""kvds doctor: its answers agree with independent evidence from the running kernel."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from harness import doctor
from harness.kconfig import config_state
from tests.conftest import REPO, needs_tool, run_kvds


def test_doctor_json_lists_every_area(kvds_env) -> None:
    res = run_kvds(["doctor", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["schema"], doc["run"]) == (1, None)  # the one --json shape (harness/emit.py): no run filed
    caps = doc["summary"]["capabilities"]
    names = [c["name"] for c in caps]
    assert len(names) == len(set(names))
    assert {c["area"] for c in caps} >= {"system", "io", "memory", "ebpf"}
    assert all(c["status"] in ("available", "unavailable", "needs-root") and c["reason"] for c in caps)
    assert not [c for c in caps if c["status"] == "error"]  # no probe of kvds's own code failed here


def test_config_derived_answers_match_kernel_config() -> None:
    for cap, option in (("kprobes", "KPROBES"), ("damon.vaddr", "DAMON_VADDR"), ("damon.paddr", "DAMON_PADDR")):
        state = config_state(option)
        if state != "unknown":
            assert doctor.capability(cap).ok == (state in ("y", "m")), cap


def test_mglru_answer_matches_sysfs() -> None:
    assert doctor.capability("mglru").ok == Path("/sys/kernel/mm/lru_gen/enabled").exists()


def test_foreign_kdamond_is_reported() -> None:
    base = Path("/sys/kernel/mm/damon/admin/kdamonds")
    running = base.is_dir() and any((d / "state").exists() and (d / "state").read_text().strip() == "on"
                                    for d in base.iterdir() if d.name.isdigit())
    assert doctor.capability("damon.free").ok == (not running)


def _ionice_class_of_child(args: list[str]) -> str | None:
    """util-linux ionice (its own ioprio_set/ioprio_get, not kvds's): start `sleep` under a class and read the
    class back from outside; None when ionice refuses to set it."""
    p = subprocess.Popen(["ionice", *args, "sleep", "5"], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):  # until ionice has exec'd sleep (or died refusing the class)
            if p.poll() is not None:
                return None
            if Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep":
                break
            time.sleep(0.01)
        out = subprocess.run(["ionice", "-p", str(p.pid)], capture_output=True, text=True, check=True).stdout
        return out.split(":")[0].strip()
    finally:
        p.kill()
        p.wait()


@needs_tool("ionice", "util-linux ionice is the independent evidence")
@pytest.mark.parametrize("cap,args,expect", [("ioprio", ["-c", "2", "-n", "4"], "best-effort"),
                                             ("ioprio.rt", ["-c", "1", "-n", "0"], "realtime"),
                                             ("ioprio.idle", ["-c", "3"], "idle")])
def test_ioprio_answers_match_util_linux_ionice(cap: str, args: list[str], expect: str) -> None:
    """Independent evidence: another program sets the class on another process and reads it back."""
    got = _ionice_class_of_child(args)
    assert doctor.capability(cap).ok == (got == expect), (cap, got)


def test_madvise_pageout_answer_matches_a_real_call() -> None:
    m = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(21)
        works = True
    except OSError:
        works = False
    assert doctor.capability("madvise.MADV_PAGEOUT").ok == works


def test_root_answer() -> None:
    assert doctor.capability("root").ok == (os.geteuid() == 0)


def test_unknown_capability_is_a_kvds_error_not_unavailable(kvds_env) -> None:
    with pytest.raises(doctor.UnknownCapability, match="no-such-thing"):
        doctor.capability("no-such-thing")
    with pytest.raises(doctor.UnknownCapability):
        doctor.require("loop", "no-such-thing")
    with pytest.raises(doctor.UnknownCapability):
        doctor.skip_unless("no-such-thing")
    res = run_kvds(["doctor", "no-such-thing"], kvds_env)
    assert res.returncode == 2 and res.stderr.strip() == ("kvds: error: unknown capability 'no-such-thing' "
                                                          "(kvds doctor --json lists every name)")


def test_an_exception_in_a_probe_is_an_error_with_its_traceback(kvds_env) -> None:
    """Break kvds's own BPF object build: the doctor must say error (exit 1, traceback), never unavailable."""
    code = ("import sys, ebpf.objects\n"
            "def broken(*a, **k): raise KeyError('kvds bug under test')\n"
            "ebpf.objects.build = broken\n"
            "from harness.cli import main\n"
            "sys.exit(main(['doctor', '--json', 'ebpf.libbpf', 'ebpf.taskstats']))\n")
    res = subprocess.run([sys.executable, "-c", code], env=kvds_env, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    caps = {c["name"]: c for c in json.loads(res.stdout)["summary"]["capabilities"]}
    if not doctor.capability("ebpf.libbpf").ok:  # the host lacks libbpf or its toolchain: build() is never reached
        assert caps["ebpf.libbpf"]["status"] == doctor.capability("ebpf.libbpf").status
        return
    assert res.returncode == 1, res.stderr
    lib = caps["ebpf.libbpf"]
    assert lib["status"] == "error" and "KeyError" in lib["reason"] and "kvds bug under test" in lib["reason"]
    assert "Traceback (most recent call last)" in lib["traceback"] and "def broken" not in lib["reason"]
    assert "kvds error probing ebpf.libbpf" in res.stderr and "KeyError: 'kvds bug under test'" in res.stderr
    assert caps["ebpf.taskstats"]["status"] == doctor.capability("ebpf.taskstats").status  # the rest of the area answers


def test_hidden_capability_is_reported_unavailable(kvds_env, monkeypatch) -> None:
    monkeypatch.setenv(doctor.HIDE_ENV, "loop,ebpf.taskstats")
    for name in ("loop", "ebpf.taskstats"):
        c = doctor.capability(name)
        assert c.status == "unavailable" and c.reason.startswith(f"hidden by {doctor.HIDE_ENV}"), c
    res = run_kvds(["doctor", "--json", "loop", "ioprio"], {**kvds_env, doctor.HIDE_ENV: "loop"})
    caps = {c["name"]: c["status"] for c in json.loads(res.stdout)["summary"]["capabilities"]}
    assert caps["loop"] == "unavailable" and caps["ioprio"] == doctor.capability("ioprio").status
    monkeypatch.setenv(doctor.HIDE_ENV, "loop,lopo")
    with pytest.raises(Exception, match="unknown capabilities: lopo"):
        doctor.capability("loop")


def test_ci_fails_a_test_whose_expected_capability_is_missing(monkeypatch) -> None:
    """gate(): skip off CI; fail with CI=true when the host kind's list has the name; skip when it does not."""
    monkeypatch.setenv(doctor.HIDE_ENV, "loop,mglru")
    monkeypatch.delenv("CI", raising=False)
    assert doctor.gate("loop")[0] == "skip"
    monkeypatch.setenv("CI", "true")
    action, why = doctor.gate("ioprio", "loop")
    assert action == "fail" and "loop" in why and "python.toml" in why
    assert doctor.gate("mglru")[0] == "skip"  # not on the list: a real absence on this kind of host


def test_host_kind_list_names_only_real_capabilities() -> None:
    """Every name in harness/host_kinds/*.toml is one the doctor reports (a typo would never fail CI)."""
    known = {c.name for c in doctor.all_capabilities()}
    for path in sorted(doctor.HOST_KINDS_DIR.glob("*.toml")):
        names = tomllib.loads(path.read_text())["required"]
        assert len(names) == len(set(names)), path.name
        assert not set(names) - known, (path.name, set(names) - known)


def test_ci_with_a_hidden_capability_fails_a_gated_test_naming_it(kvds_env) -> None:
    """End to end through pytest: the taskstats test fails with CI=true when the capability is hidden."""
    test = "tests/ebpf/test_ebpf_units.py::test_taskstats_reports_this_process"
    if not doctor.capability("ebpf.taskstats").ok:
        pytest.skip(f"kvds doctor: ebpf.taskstats {doctor.capability('ebpf.taskstats').reason}")
    runs = {}
    for label, extra in (("ci-hidden", {"CI": "true", doctor.HIDE_ENV: "ebpf.taskstats"}),
                         ("hidden", {"CI": "", doctor.HIDE_ENV: "ebpf.taskstats"}),
                         ("ci", {"CI": "true", doctor.HIDE_ENV: ""})):
        runs[label] = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test],
                                     env={**kvds_env, **extra}, capture_output=True, text=True, timeout=300,
                                     cwd=REPO)
    assert runs["ci-hidden"].returncode == 1 and "ebpf.taskstats" in runs["ci-hidden"].stdout
    assert "CI=true and python.toml says this kind of host has ebpf.taskstats" in runs["ci-hidden"].stdout
    assert runs["hidden"].returncode == 0 and "1 skipped" in runs["hidden"].stdout
    assert runs["ci"].returncode == 0 and "1 passed" in runs["ci"].stdout


def test_setup_fails_when_bpf_provisioning_fails(tmp_path: Path) -> None:
    """provision-bpf-objects.sh with a clang that fails: set-up stops (exit 1) instead of falling back quietly."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "clang").write_text("#!/bin/sh\necho 'clang: error: injected by the test' >&2\nexit 1\n")
    (fake / "clang").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "KVDS_BPF_OBJECTS": str(tmp_path / "objects"),
           "KVDS_PYTHON": sys.executable}
    res = subprocess.run(["bash", str(REPO / "harness/setup/provision-bpf-objects.sh"), str(REPO)], env=env,
                         capture_output=True, text=True, timeout=300)
    if not doctor.capability("ebpf.libbpf").ok and "not installed" in res.stderr:
        pytest.skip(f"kvds doctor: ebpf.libbpf {doctor.capability('ebpf.libbpf').reason}")
    assert res.returncode == 1, res.stderr
    assert "injected by the test" in res.stderr and "FAILED to build" in res.stderr
    assert not list((tmp_path / "objects").glob("*.o"))
