"""The one run shape every kvds command has, core and tracks alike (`kvds <track> <verb>`, `kvds <verb>`):

    config(args) -> <Verb>Config           parse: bad input is a UserError (one line, exit 2), a missing mechanism
                                           the doctor's reason (exit 3), before anything changes
    <verb>_run.run(cfg) -> Filed[<Verb>Summary]
                                           do the work, file the run (Filed.run is None for a verb that files
                                           nothing), return the typed summary (a harness.results.StoredSummary)
    render.<verb>(summary) -> None         print it for a person
    emit(...)                              or print it as the one --json envelope (harness/emit.py)

A track's cli builds one `Verb` per command and hands it to `add`; `execute` is the only code that runs a verb, so
every command parses, runs, renders and emits the same way. `--dry-run`, where a verb has one, is a second pair
(`dry_run`, `render_dry_run`) with the same shape: it returns the plan (a StoredSummary), changes nothing, and files
nothing. tests/core/test_verb_template.py walks every registered command and fails on a deviation from the names
above (module `<package>.<verb>_run`, function `run`, classes `<Verb>Config` / `<Verb>Summary`, renderer
`<package>.render.<verb>`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from harness.cli_args import add_json_flag
from harness.emit import emit
from harness.progress import say
from harness.results import Filed, StoredSummary

C = TypeVar("C")
S = TypeVar("S", bound=StoredSummary)


@dataclass(frozen=True)
class Verb(Generic[C, S]):
    """One command in the run shape above. `name` is what the user types (hyphens allowed: "fio-check")."""
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]   # adds the verb's options (--json is added by `add`)
    config: Callable[[argparse.Namespace], C]
    run: Callable[[C], Filed[S]]
    render: Callable[[S], None]
    summary: type[S]
    dry_run: Callable[[C], Filed[Any]] | None = None         # --dry-run: the plan, nothing changed
    render_dry_run: Callable[[Any], None] | None = None
    results_line: bool = True                                # say "results in <run dir>" after a filed run
    exit_status: Callable[[Any], int] | None = None          # the process's status from the summary (None: 0)

    @property
    def ident(self) -> str:
        """The verb as a Python identifier: "fio-check" -> "fio_check"."""
        return self.name.replace("-", "_")


def add(sub: argparse._SubParsersAction, verb: Verb[Any, Any], **parser_kw: Any) -> argparse.ArgumentParser:
    """Register `verb` under a subparsers action; the parser runs it through `execute`."""
    p = sub.add_parser(verb.name, help=verb.help, **parser_kw)
    verb.arguments(p)
    if not any("--json" in a.option_strings for a in p._actions):
        add_json_flag(p)
    p.set_defaults(func=lambda args: execute(verb, args), verb=verb)
    return p


def execute(verb: Verb[Any, Any], args: argparse.Namespace) -> int:
    """Parse, run (or plan), then render or emit: the only path from the command line to a verb's work."""
    cfg = verb.config(args)
    as_json = bool(getattr(args, "json", False))
    if verb.dry_run is not None and getattr(args, "dry_run", False):
        plan = verb.dry_run(cfg)
        emit(plan.run, plan.summary, as_json, verb.render_dry_run)
        return 0
    out = verb.run(cfg)
    emit(out.run, out.summary, as_json, verb.render)
    if out.run is not None and verb.results_line:
        say(f"results in {out.run.path}")
    return verb.exit_status(out.summary) if verb.exit_status is not None else 0
