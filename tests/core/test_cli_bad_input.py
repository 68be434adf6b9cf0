"""The bad-input corpus: each invocation gets a one-line error naming the problem and exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.results import ResultStore
from tests.conftest import KVDS, REPO, SEED_TRACE, needs_root, needs_tool, run_kvds

GOOD = {"request_id": "r", "block_id": 1, "size_bytes": 4096, "phase": "DECODE"}


def event(**over) -> str:
    ev = {"step": 0, "event_type": "ACCESSED", "intent": dict(GOOD)}
    for k, v in over.items():
        if k.startswith("i_"):
            ev["intent"][k[2:]] = v
        elif v is None:
            ev.pop(k, None)
        else:
            ev[k] = v
    return json.dumps(ev)


TRACE_CASES = {
    "malformed-json": ('{"step": 0,', "not valid JSON"),
    "not-an-object": ("[1, 2]", "must be a JSON object"),
    "unknown-event-key": (event(colour="red"), "unknown event key 'colour'"),
    "missing-intent": (event(intent=None), "'intent' is missing"),
    "intent-not-object": (event(intent=5), "'intent' must be an object"),
    "unknown-event-type": (event(event_type="TELEPORTED"), "unknown event_type"),
    "negative-step": (event(step=-1), "step must be a non-negative integer"),
    "unknown-intent-field": (event(i_colour="red"), "unknown intent field 'colour'"),
    "string-block-id": (event(i_block_id="seven"), "'block_id' has type str"),
    "unknown-phase": (event(i_phase="NAPPING"), "unknown phase"),
    "priority-out-of-range": (event(i_request_priority=250), "outside 0-100"),
    "zero-size": (event(i_size_bytes=0), "size_bytes must be positive"),
    "null-required": (event(i_request_id=None), "must not be null"),
    "bad-latency": (event(latency_us="fast"), "latency_us must be a number"),
}

MAPPING_CASES = {
    "mapping-unknown-class": ('name = "x"\n[classes.lukewarm]\n', "unknown intent class"),
    "mapping-unknown-mechanism": ('name = "x"\n[classes.warm]\nfoo = 1\n', "unknown mechanism"),
    "mapping-bad-level": ('name = "x"\n[classes.warm]\nread_ioprio = "be/8"\n', "must be 0-7"),
    "mapping-bad-toml": ('name = \n', "not valid TOML"),
}

ARG_CASES = {
    "no-command": ([], "required"),
    "unknown-command": (["frobnicate"], "invalid choice"),
    "unknown-option": (["doctor", "--frobnicate"], "unrecognized arguments"),
    "unknown-area": (["doctor", "--area", "gpu"], "unknown probe area 'gpu'"),
    "unknown-mapping": (["map", "--mapping", "nosuch"], "unknown mapping 'nosuch'"),
    "results-missing-verb": (["results"], "required"),
    "results-unknown-run": (["results", "show", "nosuch"], "not found"),
    "results-kind-missing-value": (["results", "list", "--kind"], "expected one argument"),
    "trace-missing-file": (["trace", "stats", "/nonexistent/trace.jsonl"], "does not exist"),
    "trace-is-directory": (["trace", "stats", "/tmp"], "is a directory"),
}


# Bad input that would do harm if accepted: a device path kvds would create (under /dev, a RAM-backed filesystem,
# so the "disk" benchmark would measure memory), scratch sizes that would fill the disk or memory, filters on
# things that do not exist, output paths that cannot be written. Each must stop before any change: exit 2, one
# line, and nothing created. (Root: the checks run where the command runs, after the arguments are parsed.)
HUGE_MIB = str(1 << 40)  # one TiB of MiB: more than any disk or memory here
HARM_CASES = {
    "io-device-missing-under-dev": (["io", "bench", "--device", "/dev/does-not-exist"], "no such device"),
    "io-device-missing-under-proc": (["io", "bench", "--device", "/proc/kvds-nope/x"], "no such device"),
    "io-device-missing-under-sys": (["io", "bench", "--device", "/sys/block/kvds-nope"], "no such device"),
    "io-device-new-file": (["io", "bench", "--device", "{tmp}/new.img"], "does not exist"),
    "io-device-directory": (["io", "bench", "--device", "{tmp}"], "neither a block device nor a regular file"),
    "io-device-char-device": (["io", "bench", "--device", "/dev/null"], "neither a block device nor a regular file"),
    "io-sweep-device-missing": (["io", "sweep", "--quick", "--device", "/dev/does-not-exist"], "no such device"),
    "io-fio-check-device-missing": (["io", "fio-check", "--device", "/dev/does-not-exist"], "no such device"),
    "io-work-dir-under-dev": (["io", "bench", "--work-dir", "/dev/shm"], "do not belong under /dev"),
    "io-work-dir-missing": (["io", "bench", "--work-dir", "{tmp}/nope"], "not an existing directory"),
    "io-kv-larger-than-disk": (["io", "bench", "--kv-mib", HUGE_MIB], "MiB free"),
    "vm-arena-larger-than-memory": (["vm", "bench", "--arena-mb", HUGE_MIB], "of memory available"),
    "ebpf-overhead-larger-than-disk": (["ebpf", "overhead", "--size-mib", HUGE_MIB], "MiB free"),
    "ebpf-record-missing-pid": (["ebpf", "record", "--pid", "4194304", "--duration", "1"], "no such process"),
    "remote-baseline-larger-than-disk": (["remote", "baseline", "--file-mib", HUGE_MIB], "MiB free"),
    "report-out-unwritable": (["report", "--out", "/proc/kvds-report", "latest"], "cannot create the directory"),
    # the same class of mistake elsewhere, already refused: kept here so it stays refused
    "replay-work-dir-under-dev": (["policy", "replay", "--trace", "{seed}", "--work-dir", "/dev/kvds-nope"],
                                  "is not a directory"),
    "replay-work-dir-under-proc": (["policy", "replay", "--trace", "{seed}", "--work-dir", "/proc/kvds-nope"],
                                   "is not a directory"),
    "replay-trace-missing": (["policy", "replay", "--trace", "/nonexistent/t.jsonl"], "does not exist"),
    "replay-negative-size": (["policy", "replay", "--trace", "{seed}", "--fast-bytes", "-5"], "is not a size"),
    "replay-zero-steps": (["policy", "replay", "--trace", "{seed}", "--max-steps", "0"], "must be positive"),
    "ebpf-record-device-missing": (["ebpf", "record", "--device", "/dev/does-not-exist", "--duration", "1"],
                                   "No such file"),
    "ebpf-record-cgroup-missing": (["ebpf", "record", "--cgroup", "/sys/fs/cgroup/kvds-nope", "--duration", "1"],
                                   "is not a cgroup directory"),
    "policy-generate-out-unwritable": (["policy", "generate", "--out", "/proc/kvds-x.npz", "--events", "100"],
                                       "cannot write trace"),
    "qemu-run-share-missing": (["qemu", "run", "--share", "/nonexistent/share", "--", "true"], "does not exist"),
    "remote-target-bad-port": (["remote", "hosts", "--target", "ssh://user@host:99999"], "Port out of range"),
    "remote-target-unknown-scheme": (["remote", "hosts", "--target", "bogus://x"], "only local, guest and ssh://"),
    "remote-hosts-file-missing": (["remote", "hosts", "--hosts", "/nonexistent/hosts"], "cannot read hosts file"),
}


def assert_one_line_error(res: subprocess.CompletedProcess, needle: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("kvds: error:") and needle in lines[0], lines[0]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("name", sorted(ARG_CASES))
def test_bad_arguments(name: str, kvds_env) -> None:
    argv, needle = ARG_CASES[name]
    assert_one_line_error(run_kvds(argv, kvds_env), needle)


@pytest.mark.parametrize("name", sorted(TRACE_CASES))
def test_bad_trace_lines(name: str, tmp_path, kvds_env) -> None:
    line, needle = TRACE_CASES[name]
    p = tmp_path / "t.jsonl"
    p.write_text(event() + "\n" + event() + "\n" + line + "\n")
    res = run_kvds(["trace", "stats", str(p)], kvds_env)
    assert_one_line_error(res, needle)
    assert f"t.jsonl:3:" in res.stderr


def test_empty_trace(tmp_path, kvds_env) -> None:
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    assert_one_line_error(run_kvds(["trace", "stats", str(p)], kvds_env), "is empty")


@pytest.mark.parametrize("name", sorted(MAPPING_CASES))
def test_bad_mapping_file(name: str, tmp_path, kvds_env) -> None:
    body, needle = MAPPING_CASES[name]
    p = tmp_path / "m.toml"
    p.write_text(body)
    assert_one_line_error(run_kvds(["map", "--mapping", str(p)], kvds_env), needle)


@needs_root
@needs_tool("setpriv", "drops to nobody to run a root-only command")
def test_root_only_command_as_non_root(kvds_env, tmp_path) -> None:
    env = dict(kvds_env, HOME=str(tmp_path))
    os.chmod(tmp_path, 0o777)
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *KVDS, "restore"],
                         env=env, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert_one_line_error(res, "needs root")


@needs_root  # these commands refuse non-root first
@pytest.mark.parametrize("name", sorted(HARM_CASES))
def test_harmful_input_is_refused_before_any_change(name: str, tmp_path, kvds_env) -> None:
    argv, needle = HARM_CASES[name]
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{seed}", str(SEED_TRACE)) for a in argv]
    work = Path(kvds_env["KVDS_WORK_DIR"])
    if argv[0] == "report":  # a stored run to report on, so only --out is wrong
        ResultStore().new_run("vm-bench", {}).write_summary({})
    missing = [a for a in argv if a.startswith("/") and not Path(a).exists()]
    res = run_kvds(argv, kvds_env, timeout=120)
    assert_one_line_error(res, needle)
    assert [a for a in missing if Path(a).exists()] == [], "a refused command created the path it was given"
    assert not work.exists() or not any(work.iterdir()), list(work.iterdir())
    assert not Path("/proc/kvds-report").exists()
