"""Every `kvds qemu` verb in the one run shape (harness/verbs.py): module `qemu_validation.<verb>_run` with
`run(cfg: <Verb>Config) -> Filed[<Verb>Summary]`, a StoredSummary that writes no as_dict/from_json of its own,
the renderer `render.<verb>` (and `<verb>_dry_run` for a plan); `build --list/--prune` run the verbs they alias."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from harness.results import StoredSummary
from qemu_validation import cli, render

KVDS = [sys.executable, "-m", "harness.cli", "qemu"]


@pytest.mark.parametrize("verb", cli.VERBS, ids=lambda v: v.name)
def test_verb_has_the_one_run_shape(verb) -> None:
    camel = "".join(w.capitalize() for w in verb.ident.split("_"))
    mod = importlib.import_module(f"qemu_validation.{verb.ident}_run")
    hints = typing.get_type_hints(mod.run)
    assert verb.run is mod.run and hints["cfg"] is getattr(mod, f"{camel}Config")
    assert typing.get_args(hints["return"]) == (verb.summary,) and verb.summary.__name__ == f"{camel}Summary"
    assert issubclass(verb.summary, StoredSummary)
    assert not {"as_dict", "from_json"} & set(vars(verb.summary))
    assert verb.render is getattr(render, verb.ident)
    if verb.dry_run is not None:
        (plan,) = typing.get_args(typing.get_type_hints(verb.dry_run)["return"])
        assert plan.__name__ == f"{camel}Plan" and verb.render_dry_run is getattr(render, f"{verb.ident}_dry_run")


@pytest.mark.parametrize(("alias", "verb"), [(["build", "--list"], ["build-list"]),
                                             (["build", "--prune", "--dry-run"], ["build-prune", "--dry-run"])])
def test_build_flags_are_aliases_of_their_verbs(alias: list[str], verb: list[str], tmp_path: Path) -> None:
    env = dict(os.environ, KVDS_CACHE_DIR=str(tmp_path / "cache"))
    a, v = (subprocess.run([*KVDS, *argv, "--json"], capture_output=True, text=True, env=env, timeout=120)
            for argv in (alias, verb))
    assert a.returncode == v.returncode == 0, (a.stderr, v.stderr)
    assert json.loads(a.stdout) == json.loads(v.stdout)


def test_list_and_prune_together_are_refused(tmp_path: Path) -> None:
    env = dict(os.environ, KVDS_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([*KVDS, "build", "--list", "--prune"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["kvds: error: --list and --prune are two verbs: give one"]
