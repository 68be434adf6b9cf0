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
