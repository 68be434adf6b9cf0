"""Target syntax, hosts files, the argv hosts run, secret scrubbing, and the CLI's answers to bad input.
No network: these run the real parsers and the real `kvds` entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import doctor
from harness.errors import UserError
from harness.paths import repo_root
from harness.remote.args import strip_target_argv, with_json
from harness.remote.guest import guest_lab_status
from harness.remote.scrub import scrub, scrub_obj
from harness.remote.targets import GuestTarget, LocalTarget, SshTarget, check_unique, parse_hosts_file, parse_target
from tests.remote.conftest import kvds


def test_target_forms() -> None:
    assert parse_target("local") == LocalTarget()
    assert parse_target("guest") == GuestTarget()
    t = parse_target("ssh://bob@db1.example:2222")
    assert isinstance(t, SshTarget) and (t.user, t.host, t.port, t.tag) == ("bob", "db1.example", 2222, "db1.example-2222")
    assert t.needs_sudo
    t = parse_target("10.0.0.5")
    assert (t.user, t.port, t.tag, t.needs_sudo) == ("root", 22, "10.0.0.5", False)
    t = parse_target("ssh://root@[fd00::7]:22")
    assert t.host == "fd00::7" and t.describe() == "ssh://root@[fd00::7]"


@pytest.mark.parametrize("bad", ["", "ftp://h", "ssh://", "ssh://h/path", "ssh://h:99999", "ssh://h?x=1"])
def test_bad_targets_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError):
        parse_target(bad)


def test_password_in_target_is_refused_without_echoing_it() -> None:
    with pytest.raises(UserError) as e:
        parse_target("ssh://bob:hunter2secret@h1")
    assert "hunter2secret" not in str(e.value) and "passwords are not accepted" in str(e.value)
    r = kvds("remote", "hosts", "--target", "ssh://bob:hunter2secret@h1")
    assert r.returncode == 2 and "hunter2secret" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1


def test_hosts_file(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# lab\nssh://root@10.1.0.2 name=a root=/srv/kvds identity=/k  # first\n\nbob@10.1.0.6:2200\nlocal\n")
    ts = parse_hosts_file(f)
    assert [t.tag for t in ts] == ["a", "10.1.0.6-2200", "local"]
    assert ts[0].root == "/srv/kvds" and ts[0].identity == "/k" and ts[1].user == "bob"
    f.write_text("ssh://h1 colour=red\n")
    with pytest.raises(UserError, match=r"hosts:1: .*unknown option 'colour'"):
        parse_hosts_file(f)
    f.write_text("ssh://h1 name=x\nssh://h2 name=x\n")
    with pytest.raises(UserError, match="share the tag"):
        check_unique(parse_hosts_file(f))
    f.write_text("# nothing\n")
    with pytest.raises(UserError, match="names no targets"):
        parse_hosts_file(f)
    with pytest.raises(UserError, match="cannot read hosts file"):
        parse_hosts_file(tmp_path / "missing")


def test_hosts_run_the_argv_without_target_options() -> None:
    argv = ["io", "bench", "--target", "ssh://a", "--duration", "1", "--target=local", "--hosts", "f",
            "--accept-new-host-key", "--identity", "k", "--known-hosts=kh", "--reps", "1"]
    assert strip_target_argv(argv) == ["io", "bench", "--duration", "1", "--reps", "1"]
    assert with_json(["a", "b"]) == ["a", "b", "--json"]
    assert with_json(["run", "--", "x"]) == ["run", "--json", "--", "x"]
    assert with_json(["a", "--json"]) == ["a", "--json"]


def test_scrub_removes_keys_passwords_and_tokens() -> None:
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    text = f"log {key} PASSWORD=pa55word api_token: abcdef ssh://u:pw1234@h done"
    out = scrub(text)
    for secret in ("b3BlbnNzaC1rZXktdjEAAAAA", "pa55word", "abcdef", "pw1234"):
        assert secret not in out
    assert out.startswith("log [private key redacted]") and out.endswith("done")
    assert scrub_obj({"a": ["MY_SECRET=xyz123"], "n": 3}) == {"a": ["MY_SECRET=[redacted]"], "n": 3}


def test_bad_remote_input_is_one_line_exit_2(tmp_path: Path) -> None:
    for args in (["remote", "doctor"], ["remote", "run", "--target", "local", "--", "remote", "hosts"],
                 ["remote", "hosts", "--hosts", str(tmp_path / "nope")],
                 ["remote", "baseline", "--duration", "-1"],
                 ["remote", "baseline", "--targ", "ssh://x", "--target", "local", "--target", "guest"],
                 ["remote", "hosts", "--target", "local", "--identity", str(tmp_path / "no-key")]):
        r = kvds(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_guest_target_reports_its_state() -> None:
    """`--target guest` says whether the QEMU lab can run here and, if not, why (never a silent stub)."""
    ready, why = guest_lab_status()
    r = kvds("remote", "hosts", "--check", "--target", "guest", "--json")
    row = json.loads(r.stdout)["summary"]["hosts"][0]
    assert row["status"] == ("ok" if ready else "unavailable") and row["detail"] == why
    assert r.returncode == (0 if ready else 3)


# The real `kvds` entry point with one of kvds's own modules broken: a None entry in sys.modules makes importing
# it raise ImportError. Injected on purpose: a correct checkout cannot have a broken module of its own.
BROKEN_GUEST_LAB = ("import sys; sys.modules['qemu_validation.boot.guest_command'] = None; "
                    "from harness.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("argv", [["remote", "hosts", "--check", "--target", "guest", "--json"],
                                  ["remote", "baseline", "--duration", "0.3", "--file-mib", "4", "--target", "guest",
                                   "--json"]], ids=["hosts-check", "dispatch"])
def test_an_import_error_inside_kvds_is_an_error_not_an_unavailable_guest(tmp_path: Path, argv: list[str]) -> None:
    """The guest lab ships with kvds, so failing to import it is a kvds bug: exit 1 naming the ImportError, never
    "unavailable" (exit 3), which would read as a host without the lab."""
    r = subprocess.run([sys.executable, "-c", BROKEN_GUEST_LAB, *argv], capture_output=True, text=True, cwd=repo_root(),
                       env={**os.environ, "KVDS_NO_PROGRESS": "1", "KVDS_RESULTS_DIR": str(tmp_path / "results")},
                       timeout=300)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "unavailable" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    if argv[1] == "hosts":
        assert r.stderr.strip().splitlines() == [r.stderr.strip()]
        assert "internal error" in r.stderr and "qemu_validation.boot.guest_command" in r.stderr
    else:
        guest = json.loads(r.stdout)["summary"]["hosts"]["guest"]
        assert guest["status"] == "failed" and "qemu_validation.boot.guest_command" in guest["reason"], guest


def test_local_plus_guest_dispatch_files_the_local_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-local target list runs the command per target; local's run is filed tagged 'local', and a target that
    cannot run is reported with its reason while the others still run. The guest is made unavailable through the
    doctor (QEMU hidden), so this runs whether or not the guest kernel is built (a real guest run takes minutes
    under TCG and belongs to the qemu track's tests)."""
    hide = {doctor.HIDE_ENV: "qemu.tcg,qemu.kvm"}
    monkeypatch.setenv(doctor.HIDE_ENV, hide[doctor.HIDE_ENV])
    ready, why = guest_lab_status()
    assert not ready and "hidden by KVDS_HIDE_CAPABILITIES" in why
    store = tmp_path / "results"
    r = kvds("remote", "baseline", "--duration", "0.3", "--file-mib", "4", "--target", "local", "--target", "guest",
             "--json", env={"KVDS_RESULTS_DIR": str(store), **hide})
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    hosts = doc["summary"]["hosts"]
    assert hosts["guest"]["status"] == "unavailable" and hosts["guest"]["reason"] == why
    local = hosts["local"]
    assert local["status"] == "ok" and len(local["runs"]) == 1 and local["runs"][0].endswith("--local")
    run = store / local["runs"][0]
    meta = json.loads((run / "meta.json").read_text())
    assert meta["kind"] == "host-baseline" and meta["remote"]["host"] == "local"
    assert (run / "samples" / "pread_direct_4k_ns.npy").exists()
    assert (Path(doc["run"]) / "hosts" / "local" / "doctor.json").exists()


def test_a_checkout_whose_wheel_will_not_build_is_a_kvds_error_not_an_unavailable_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ssh target gets a wheel of this checkout; when pip refuses to build it, kvds is broken here (exit 1),
    not the targets "unavailable" (exit 3). A checkout with a malformed build-system table: pip's real refusal,
    reached before any download."""
    from harness.errors import Unavailable
    from harness.remote.ship import WheelBuildFailed, build_wheel

    root = tmp_path / "checkout"
    (root / "harness").mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[build-system]\nrequires = 5\n\n[project]\nname = "kvds"\nversion = "0"\n'
                                         '\n[tool.setuptools.packages.find]\ninclude = ["harness*"]\n')
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(Exception) as e:
        build_wheel(root)
    assert isinstance(e.value, WheelBuildFailed) and not isinstance(e.value, Unavailable), repr(e.value)
    assert "building the kvds wheel" in str(e.value) and "build-system" in str(e.value)


NO_SUCH_HOST = "ssh://no-such-host.invalid"  # RFC 6761: a .invalid name never resolves
COMMANDS_WITH_TARGETS = {
    "remote-hosts-check": ["remote", "hosts", "--check"],
    "remote-doctor": ["remote", "doctor"],
    "remote-run": ["remote", "run", "--target", "local", "--", "doctor"],  # local runs nothing: all refused first
    "remote-baseline": ["remote", "baseline", "--duration", "0.3", "--file-mib", "4"],
    "vm-bench": ["vm", "bench", "--arena-mb", "16", "--reps", "1"],
    "io-bench": ["io", "bench", "--duration", "1", "--reps", "1"],
}


@pytest.mark.parametrize("argv", list(COMMANDS_WITH_TARGETS.values()), ids=list(COMMANDS_WITH_TARGETS))
def test_an_unresolvable_ssh_host_is_bad_input_exit_2_before_anything_is_written(tmp_path: Path,
                                                                                argv: list[str]) -> None:
    """Every command that takes --target refuses a host name that does not exist (here, in a hosts file too): one
    line naming it, exit 2, no wheel built, no invocation record, nothing run on the other targets."""
    hosts = tmp_path / "hosts"
    hosts.write_text(f"local\n{NO_SUCH_HOST} name=typo\n")
    store = tmp_path / "results"
    for where in (["--target", NO_SUCH_HOST], ["--hosts", str(hosts)]):
        if argv[:2] == ["remote", "run"] and where[0] == "--hosts":
            args = argv[:2] + where + argv[4:]
        else:
            k = argv.index("--") if "--" in argv else len(argv)
            args = argv[:k] + where + argv[k:]
        r = kvds(*args, env={"KVDS_RESULTS_DIR": str(store), "KVDS_CACHE_DIR": str(tmp_path / "cache")})
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "Traceback" not in r.stderr
        assert "no-such-host.invalid" in r.stderr and "does not resolve" in r.stderr, r.stderr
        assert not store.exists() or not any(store.iterdir()), sorted(store.iterdir())
        assert not (tmp_path / "cache" / "remote").exists()  # refused before the wheel was built


@pytest.fixture
def silent_port():
    """A local port that takes TCP connections and never says anything: a host that resolves but does not answer."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed: connections are refused


def test_a_host_that_resolves_but_refuses_or_never_answers_is_a_run_failure_exit_1(silent_port: int) -> None:
    """Not bad input: the name is fine, the host fails. Exit 1 with that host's reason on one line, no traceback
    (paramiko's own thread logs one unless kvds silences it)."""
    cases = {f"ssh://127.0.0.1:{_closed_port()}": "Connection refused",
             f"ssh://127.0.0.1:{silent_port}": "no SSH server answered within 1 s"}
    for target, why in cases.items():
        r = kvds("remote", "hosts", "--check", "--target", target, "--connect-timeout", "1")
        assert r.returncode == 1, (target, r.returncode, r.stdout, r.stderr)
        assert r.stderr == "", r.stderr
        lines = r.stdout.strip().splitlines()
        assert len(lines) == 1 and f"failed: cannot connect to {target.replace('//', '//root@')}" in lines[0], lines
        assert why in lines[0], lines


def test_a_command_run_on_a_host_that_refuses_fails_that_host_exit_1(tmp_path: Path) -> None:
    """`kvds vm bench --target` (any opted-in command) through the dispatcher: the host is marked failed with the
    reason on one line, exit 1, and the invocation is recorded."""
    target = f"ssh://127.0.0.1:{_closed_port()}"
    r = kvds("vm", "bench", "--arena-mb", "16", "--reps", "1", "--target", target, "--connect-timeout", "1", "--json",
             env={"KVDS_RESULTS_DIR": str(tmp_path / "results")})
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    (host,) = doc["summary"]["hosts"].values()
    assert host["status"] == "failed" and host["stage"] == "connect", host
    assert "Connection refused" in host["reason"] and "\n" not in host["reason"], host
    assert Path(doc["run"]).is_dir()


def test_a_qemu_probe_in_error_is_raised_not_reported_as_a_missing_guest_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    """A QEMU probe that crashed (status "error": kvds's bug) must not read as "cannot run on this host". The probe
    area's answer is replaced by an error row, as doctor.probe_area makes one when a probe module raises."""
    from harness.capability import kvds_error

    real = doctor.probe_area

    def qemu_probe_crashed(area: str):
        if area != "qemu":
            return real(area)
        err = kvds_error("qemu.tcg", "listing QEMU's accelerators", "qemu", RuntimeError("injected"))
        return tuple(err if c.name == "qemu.tcg" else c for c in real(area))

    monkeypatch.setattr(doctor, "probe_area", qemu_probe_crashed)
    assert doctor.capability("qemu.tcg").is_error
    with pytest.raises(doctor.ProbeError, match="qemu.tcg: kvds error while listing QEMU's accelerators"):
        guest_lab_status()
