"""harness.verbs.execute, the only path from a command line to a verb's work: the run path renders the typed
summary or emits the one JSON envelope, names the run directory, and takes its exit status from the summary; the
--dry-run path plans and files nothing."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import pytest

from harness.results import Filed, ResultStore, StoredSummary
from harness.verbs import Verb, add, execute


@dataclass
class EchoSummary(StoredSummary):
    word: str = ""
    failed: bool = False


@dataclass
class EchoPlan(StoredSummary):
    would_say: str = ""


@dataclass(frozen=True)
class EchoConfig:
    word: str


def make_verb(store: ResultStore | None, calls: list[str]) -> Verb:
    def arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("word")
        p.add_argument("--dry-run", action="store_true")

    def run(cfg: EchoConfig) -> Filed[EchoSummary]:
        calls.append("run")
        filed = store.new_run("echo", {"word": cfg.word}) if store is not None else None
        return Filed(filed, EchoSummary(cfg.word, failed=cfg.word == "fail"))

    def dry_run(cfg: EchoConfig) -> Filed[EchoPlan]:
        calls.append("dry_run")
        return Filed(None, EchoPlan(cfg.word))

    return Verb("echo", "say a word", arguments, lambda a: EchoConfig(a.word), run,
                lambda s: print(f"said {s.word} ({type(s).__name__})"), EchoSummary, dry_run=dry_run,
                render_dry_run=lambda p: print(f"would say {p.would_say}"),
                exit_status=lambda s: 1 if s.failed else 0)


def parse(verb: Verb, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kvds")
    add(parser.add_subparsers(dest="command"), verb)
    return parser.parse_args(argv)


def test_run_renders_the_typed_summary_and_names_the_run(tmp_path, capsys) -> None:
    calls: list[str] = []
    verb = make_verb(ResultStore(tmp_path), calls)
    assert execute(verb, parse(verb, ["echo", "hello"])) == 0
    out, err = capsys.readouterr()
    assert calls == ["run"]
    assert out == "said hello (EchoSummary)\n"
    (run_dir,) = tmp_path.iterdir()
    assert "results in" in err and str(run_dir) in err.replace("\n", "")  # say() wraps long lines


def test_json_is_the_one_envelope(tmp_path, capsys) -> None:
    verb = make_verb(ResultStore(tmp_path), [])
    args = parse(verb, ["echo", "hello", "--json"])  # add() gave the verb its --json
    assert execute(verb, args) == 0
    doc = json.loads(capsys.readouterr().out)
    (run_dir,) = tmp_path.iterdir()
    assert doc == {"schema": 1, "run": str(run_dir), "summary": {"word": "hello", "failed": False}}


def test_a_verb_that_files_nothing_has_run_null(capsys) -> None:
    verb = make_verb(None, [])
    assert execute(verb, parse(verb, ["echo", "x", "--json"])) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["run"] is None and "results in" not in err


def test_dry_run_plans_and_runs_nothing(tmp_path, capsys) -> None:
    calls: list[str] = []
    verb = make_verb(ResultStore(tmp_path), calls)
    assert execute(verb, parse(verb, ["echo", "hi", "--dry-run"])) == 0
    assert capsys.readouterr().out == "would say hi\n"
    assert execute(verb, parse(verb, ["echo", "hi", "--dry-run", "--json"])) == 0
    assert json.loads(capsys.readouterr().out) == {"schema": 1, "run": None, "summary": {"would_say": "hi"}}
    assert calls == ["dry_run", "dry_run"] and not any(tmp_path.iterdir())


def test_the_exit_status_comes_from_the_summary(tmp_path, capsys) -> None:
    verb = make_verb(ResultStore(tmp_path), [])
    assert execute(verb, parse(verb, ["echo", "fail"])) == 1
    assert "said fail" in capsys.readouterr().out


def test_bad_config_stops_before_the_run(tmp_path) -> None:
    from harness.errors import UserError

    calls: list[str] = []
    verb = make_verb(ResultStore(tmp_path), calls)

    def refuse(args: argparse.Namespace) -> EchoConfig:
        raise UserError("no")

    bad = Verb(verb.name, verb.help, verb.arguments, refuse, verb.run, verb.render, verb.summary)
    with pytest.raises(UserError):
        execute(bad, parse(bad, ["echo", "x"]))
    assert calls == [] and not any(tmp_path.iterdir())
