"""Every `kvds` command has the one run shape of harness/verbs.py, with its names (the brief's template):

    kvds <track> <verb>   ->  <package>.<ident>_run.run(cfg: <Ident>Config) -> Filed[<Ident>Summary]
                              <package>.render.<ident>(summary: <Ident>Summary) -> None
    --dry-run             ->  dry_run(cfg) -> Filed[<Ident>Plan], <package>.render.<ident>_dry_run(plan)

<package> is the package of the module that registers the command (its `kvds.commands` entry point, e.g.
io_priority for io_priority.cli); ident is the words after the track, "-" -> "_" (`kvds io fio-check`: fio_check).
The core's own commands (harness.commands.*) are one package, harness.commands, whose idents are the whole command
(`kvds results list`: results_list). The real parser is built with every track loaded; every deviation of every
leaf command is reported in one failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import keyword
import typing

from harness import cli
from harness.commands.summary import MapSummary
from harness.results import Filed, StoredSummary
from harness.verbs import Verb

CORE_PACKAGE = "harness.commands"


Leaf = tuple[tuple[str, ...], argparse.ArgumentParser]


def leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[Leaf]:
    """(command words, parser) for every subcommand that has no subcommands of its own. An alias (`kvds policy
    bench` for `speed`) is the same parser under a second name: walked once, under its first name."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(words, parser)]
    out: list[Leaf] = []
    for a in subs:
        seen: set[int] = set()
        for name, p in a.choices.items():
            if id(p) not in seen:
                seen.add(id(p))
                out += leaves(p, (*words, name))
    return out


def package_and_ident(module: str, words: tuple[str, ...]) -> tuple[str, str]:
    if module.startswith(CORE_PACKAGE + "."):
        return CORE_PACKAGE, "_".join(words).replace("-", "_")
    return module.rpartition(".")[0] or module, "_".join(words[1:] or words).replace("-", "_")


def python_name(ident: str) -> str:
    """The function name for a verb: a Python keyword takes a trailing underscore (`kvds policy import`:
    render.import_), as PEP 8 asks."""
    return ident + "_" if keyword.iskeyword(ident) else ident


def camel(ident: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in ident.split("_"))


def hints(fn: typing.Callable[..., typing.Any]) -> tuple[list[typing.Any], typing.Any]:
    """(parameter annotations, return annotation) of fn, resolved in its module."""
    got = typing.get_type_hints(fn)
    params = [got.get(p) for p in inspect.signature(fn).parameters]
    return params, got.get("return")


def filed_of(annotation: typing.Any) -> typing.Any:
    """X for an annotation Filed[X], else None."""
    if typing.get_origin(annotation) is Filed:
        (inner,) = typing.get_args(annotation)
        return inner
    return None


def summary_problems(cls: typing.Any, want: str) -> list[str]:
    out = []
    if not isinstance(cls, type):
        return [f"returns Filed[{cls!r}], not Filed[{want}]"]
    if cls.__name__ != want:
        out.append(f"its summary class is {cls.__name__}, not {want}")
    if not issubclass(cls, StoredSummary):
        out.append(f"{cls.__name__} is not a harness.results.StoredSummary")
    if not dataclasses.is_dataclass(cls):
        out.append(f"{cls.__name__} is not a dataclass")
    return out


def deviations(verb: typing.Any, module: str, words: tuple[str, ...]) -> list[str]:
    """What in one leaf command's Verb departs from the template (empty when it follows it)."""
    if not isinstance(verb, Verb):
        return ["registers no harness.verbs.Verb (use harness.verbs.add)"]
    package, ident = package_and_ident(module, words)
    Ident = camel(ident)
    out: list[str] = []
    if verb.name != words[-1]:
        out.append(f"Verb.name is {verb.name!r}, the command is {words[-1]!r}")
    run_module = f"{package}.{ident}_run"
    where = f"{verb.run.__module__}.{getattr(verb.run, '__qualname__', verb.run)}"
    if (verb.run.__module__, verb.run.__name__) != (run_module, "run"):
        out.append(f"its run is {where}, not {run_module}.run")
    try:
        params, returns = hints(verb.run)
    except Exception as exc:  # an annotation that does not resolve is a deviation too
        return out + [f"{where}'s annotations do not resolve: {exc}"]
    if len(params) != 1:
        out.append(f"{where} takes {len(params)} parameters, not one (cfg: {Ident}Config)")
    elif not isinstance(params[0], type) or params[0].__name__ != f"{Ident}Config":
        out.append(f"{where}'s parameter is annotated {params[0]!r}, not {Ident}Config")
    elif params[0].__module__ != run_module:
        out.append(f"{Ident}Config is defined in {params[0].__module__}, not {run_module}")
    summary = filed_of(returns)
    if summary is None:
        out.append(f"{where} returns {returns!r}, not Filed[{Ident}Summary]")
    else:
        out += summary_problems(summary, f"{Ident}Summary")
        if summary is not verb.summary:
            out.append(f"Verb.summary is {getattr(verb.summary, '__name__', verb.summary)}, run returns {summary!r}")
    out += renderer_problems(verb.render, f"{package}.render", python_name(ident), verb.summary)
    if (verb.dry_run is None) != (verb.render_dry_run is None):
        out.append("has one of dry_run / render_dry_run without the other")
    if verb.dry_run is not None:
        if verb.dry_run.__name__ != "dry_run":
            out.append(f"its dry-run is {verb.dry_run.__module__}.{verb.dry_run.__name__}, not a function dry_run")
        try:
            _, plan_returns = hints(verb.dry_run)
        except Exception as exc:
            return out + [f"dry_run's annotations do not resolve: {exc}"]
        plan = filed_of(plan_returns)
        if plan is None:
            out.append(f"its dry_run returns {plan_returns!r}, not Filed[{Ident}Plan]")
        else:
            out += summary_problems(plan, f"{Ident}Plan")
        if verb.render_dry_run is not None:
            out += renderer_problems(verb.render_dry_run, f"{package}.render", f"{ident}_dry_run", plan)
    return out


def renderer_problems(render: typing.Any, module: str, name: str, takes: typing.Any) -> list[str]:
    out = []
    if (getattr(render, "__module__", None), getattr(render, "__name__", None)) != (module, name):
        out.append(f"its renderer is {getattr(render, '__module__', '?')}.{getattr(render, '__name__', render)}, "
                   f"not {module}.{name}")
    try:
        params, _ = hints(render)
    except Exception as exc:
        return out + [f"renderer {name}'s annotations do not resolve: {exc}"]
    if not params or params[0] is not takes:
        out.append(f"renderer {name} takes {params[0] if params else 'nothing'!r}, not the typed "
                   f"{getattr(takes, '__name__', takes)}")
    return out


def test_every_command_has_the_run_shape() -> None:
    parser = cli.build_parser()
    modules = dict(cli.command_modules())
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    problems = []
    n = 0
    for command, sub in top.choices.items():
        module = modules.get(command)
        if module is None:
            problems.append(f"kvds {command}: registered by no entry point nor by the core's command list")
            continue
        for words, leaf in leaves(sub, (command,)):
            n += 1
            verb = leaf.get_default("verb")
            problems += [f"kvds {' '.join(words)} ({module}): {p}" for p in deviations(verb, module, words)]
    assert n > 20, f"only {n} leaf commands found: the parser was not built with every track"
    assert not problems, f"{len(problems)} deviation(s) from the run shape in {n} commands:\n" + "\n".join(problems)


def test_the_walk_finds_a_known_deviation() -> None:
    """The checks can fail: a verb with the wrong names is reported on every count."""
    from harness.commands import render

    wrong = Verb("map", "h", lambda p: None, lambda a: a, run, render.report, MapSummary)
    got = "\n".join(deviations(wrong, "harness.commands.map", ("map",)))
    for part in ("not harness.commands.map_run.run", "not MapConfig", "not Filed[MapSummary]",
                 "not harness.commands.render.map", "not the typed MapSummary"):
        assert part in got
    assert deviations(cli_verb("map"), "harness.commands.map", ("map",)) == []


def run(cfg: int) -> MapSummary:
    """A run with the wrong module, parameter and return annotation, for the test above."""
    raise AssertionError("never called")


def cli_verb(command: str) -> Verb:
    from importlib import import_module

    return import_module(f"harness.commands.{command}").VERB
