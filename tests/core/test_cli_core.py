"""CLI plumbing: a track module that cannot be imported reports why instead of breaking every command."""

from __future__ import annotations

import sys

import pytest

from harness import cli


def test_broken_track_module_is_reported_not_fatal(tmp_path, monkeypatch, capsys) -> None:
    pkg = tmp_path / "brokentrack"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("import module_that_does_not_exist_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "command_modules", lambda: [("map", "harness.commands.map"),
                                                         ("brokentrack", "brokentrack.cli")])
    assert cli.main(["map", "--list"]) == 0
    capsys.readouterr()
    assert cli.main(["brokentrack", "anything"]) == 1  # kvds's own code is broken: an error, not "unavailable"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot load" in err[0] and "module_that_does_not_exist_anywhere" in err[0]
    sys.modules.pop("brokentrack.cli", None)


def test_emit_prints_one_strict_shape(tmp_path, capsys) -> None:
    """The one --json envelope (harness/emit.py): schema, the run filed or null, the summary object; NaN is null."""
    import json
    import math

    from harness.emit import SCHEMA, emit
    from harness.results import ResultStore

    run = ResultStore(tmp_path).new_run("x", {})
    emit(run, {"p99": math.nan, "n": 3}, True)
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert doc == {"schema": SCHEMA, "run": str(run.path), "summary": {"p99": None, "n": 3}}
    emit(None, {"n": 1}, False, lambda s: print(f"text {s['n']}"))
    assert capsys.readouterr().out == "text 1\n"
    with pytest.raises(TypeError):
        emit(None, [1, 2], True)  # type: ignore[arg-type]


@pytest.mark.parametrize("argv", [["doctor", "--area", "system"], ["map", "--list"], ["map"], ["results", "list"],
                                  ["trace", "stats", "{seed}"]], ids=lambda a: "-".join(a[:2]))
def test_core_commands_print_the_one_json_shape(argv, kvds_env) -> None:
    import json

    from tests.conftest import SEED_TRACE, run_kvds

    r = run_kvds([a.replace("{seed}", str(SEED_TRACE)) for a in argv] + ["--json"], kvds_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert list(doc) == ["schema", "run", "summary"] and doc["schema"] == 1 and isinstance(doc["summary"], dict)


def test_entry_points_older_than_pyproject_are_refused_not_dropped(monkeypatch, capsys) -> None:
    """A track declared in pyproject.toml but not installed yet (no `make setup` since): kvds says so, exit 1."""
    from harness import tracks

    tracks.registered.cache_clear()
    real = tracks.declared
    monkeypatch.setattr(tracks, "declared", lambda g: (real(g) or set()) | {"newtrack"} if g == "kvds.commands"
                        else real(g))
    try:
        assert cli.main(["map", "--list"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "newtrack" in err[0] and "make setup" in err[0]
    finally:
        tracks.registered.cache_clear()


def _imports_numba(code: str) -> bool:
    """Whether running `code` in a fresh interpreter leaves the policy simulator's numba imported."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint('numba' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_a_command_line_loads_only_its_own_command() -> None:
    """`kvds doctor` or `kvds restore` does not pay for every track's imports (the policy track's numba costs
    most of a second per invocation); --help, a misspelt command and `kvds remote` still see every command."""
    assert cli._sole_command(["doctor", "--json"]) == "doctor"
    assert cli._sole_command(["io", "bench"]) == "io"
    for argv in ([], ["--help"], ["docter"], ["remote", "run", "--", "io", "bench"]):
        assert cli._sole_command(argv) is None, argv
    assert not _imports_numba("from harness import cli\ncli.build_parser(cli._sole_command(['restore']))")
    assert _imports_numba("from harness import cli\ncli.build_parser()")


def test_help_and_a_misspelt_command_list_every_command(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    listed = capsys.readouterr().out
    assert all(command in listed for command, _ in cli.command_modules())
    assert cli.main(["docter"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'docter'" in err and "policy" in err and "restore" in err
