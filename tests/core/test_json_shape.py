"""One shape for every `--json`: each track's main command, run for real as a kvds subprocess, prints one
strict-JSON document {"schema", "run", "summary"} (harness/emit.py). Only commands that finish in seconds and
change nothing are run here: the core's read-only commands, the guest lab's verbs that boot nothing (a dry run,
the build cache's list and prune --dry-run, a build already cached), a short eBPF recording, a policy comparison
of six small requests. A track's long runs print the same envelope from the same emit call; their own tests read it.

A track joins by adding its command to COMMANDS; until then it is named in TRACKS_TO_JOIN with the command that
will stand for it, and a test fails when a registered track is in neither (so none is forgotten).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import doctor, tracks
from harness.emit import SCHEMA
from tests.conftest import run_kvds


# name: (argv, the doctor capabilities it needs, whether it files a run)
COMMANDS: dict[str, tuple[list[str], tuple[str, ...], bool]] = {
    "doctor": (["doctor", "--json"], (), False),
    "results": (["results", "list", "--json"], (), False),
    "map": (["map", "--json"], (), False),
    "ebpf": (["ebpf", "record", "--probe", "blk", "--duration", "0.2", "--no-plots", "--json"],
             ("root", "ebpf.probe.blk"), True),
    # the goal bench and the load-time bench at their smallest (a 16 MiB journaled loop device; one libbpf load)
    "ebpf-overhead": (["ebpf", "overhead", "--probe", "blk", "--reps", "3", "--seconds", "0.2", "--size-mib", "16",
                       "--json"], ("root", "ebpf.probe.blk"), True),
    "ebpf-load-time": (["ebpf", "load-time", "--probe-set", "blk", "--runs", "1", "--json"],
                       ("root", "ebpf.libbpf", "ebpf.probe.blk"), True),
    "qemu-run-dry-run": (["qemu", "run", "--dry-run", "--json", "--", "true"], ("qemu.tcg",), False),
    "qemu-build-list": (["qemu", "build", "--list", "--json"], (), False),
    "qemu-build-prune-dry-run": (["qemu", "build", "--prune", "--dry-run", "--json"], (), False),
    # the smallest bench (8 MiB, one repetition of none and intent, ~20 s); its swap and cgroups are journaled
    "vm": (["vm", "bench", "--arena-mb", "8", "--reps", "1", "--no-damos", "--mglru", "keep", "--json"],
           ("root", "memcg", "pagemap", "swap.zram"), True),
    "io-bench-dry-run": (["io", "bench", "--dry-run", "--json"], (), False),
    # the smallest net bench: one repetition of the fetcher alone and beside one bulk stream, no anchor (~10 s)
    "net": (["net", "bench", "--variants", "unloaded,baseline", "--reps", "1", "--duration-s", "0.5",
             "--bulk-streams", "1", "--no-anchor", "--json"], ("root", "net.netns", "net.veth", "net.qdisc.htb"), True),
    "net-dry-run": (["net", "bench", "--dry-run", "--json"], (), False),
    "e2e-dry-run": (["e2e", "--dry-run", "--steps", "40", "--reps", "1", "--json"], (), False),
    "policy": (["policy", "compare", "--profile", "balanced", "--set", "n_requests=6", "--set", "gen_tokens=16:64",
                "--seeds", "5", "--policies", "LRU,MIN", "--json"], (), True),
}
# Not here: qemu validate, exit-bench, reclaim-bench and rebuild-time have no path that boots nothing (their bad input
# exits 2 before any JSON); they print through the same emit call, and their guest tests read the envelope.

# Tracks whose --json is not yet the one shape, each with the command that will join COMMANDS (quick, changes
# nothing) once the track's template work lands.
TRACKS_TO_JOIN = {
}


def strict_loads(text: str) -> object:
    """json.loads that refuses NaN and the infinities (Python's json accepts them; strict JSON does not)."""
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def check_shape(doc: object, files_run: bool) -> None:
    assert isinstance(doc, dict) and list(doc) == ["schema", "run", "summary"], doc
    assert doc["schema"] == SCHEMA
    assert isinstance(doc["summary"], dict)
    if files_run:
        assert isinstance(doc["run"], str) and (Path(doc["run"]) / "meta.json").exists(), doc["run"]
    else:
        assert doc["run"] is None, doc["run"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_main_command_prints_the_one_strict_shape(name: str, kvds_env: dict[str, str]) -> None:
    argv, needs, files_run = COMMANDS[name]
    missing = [c for c in needs if not doctor.capability(c).ok]
    if missing:
        pytest.skip(f"{', '.join(missing)}: {doctor.capability(missing[0]).reason}")
    r = run_kvds(argv, kvds_env, timeout=300)
    assert r.returncode == 0, (argv, r.stderr)
    check_shape(strict_loads(r.stdout), files_run)


def test_a_cached_build_prints_the_one_strict_shape(debug_kernel, kvds_env: dict[str, str]) -> None:
    """`kvds qemu build --kasan` answers from the cache: the debug_kernel fixture (tests/conftest.py) built it before
    this test, whatever the order the tests run in."""
    r = run_kvds(["qemu", "build", "--kasan", "--json"], kvds_env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = strict_loads(r.stdout)
    check_shape(doc, files_run=False)
    assert doc["summary"]["id"] == debug_kernel.id and doc["summary"]["cached"] is True, doc


def test_every_track_is_checked_or_listed_to_join() -> None:
    checked = {argv[0] for argv, _, _ in COMMANDS.values()}
    names = {ep.name for ep in tracks.commands()}
    assert sorted(names - checked - set(TRACKS_TO_JOIN)) == []
    assert sorted(set(TRACKS_TO_JOIN) & checked) == [], "a track that joined COMMANDS leaves TRACKS_TO_JOIN"


@pytest.mark.parametrize("text", ['{"schema": 1, "run": null, "summary": {"x": NaN}}',
                                  '{"schema": 1, "run": null, "summary": {"x": -Infinity}}'])
def test_strict_loads_refuses_what_json_loads_accepts(text: str) -> None:
    assert json.loads(text)["summary"]  # Python's json reads it...
    with pytest.raises(ValueError, match="not strict JSON"):
        strict_loads(text)              # ...the check does not
