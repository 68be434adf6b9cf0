"""The `kvds` command line: one parser, one module per command (damo style), uniform errors.

Conventions: `kvds <track> <verb>`; `--json` on everything that prints results; user errors print one line
and exit 2; a missing mechanism exits 3 with the doctor's reason; Ctrl-C restores the journal and exits 130;
SIGTERM restores and exits 143. Every path out of main() restores the knob journal.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
from typing import Sequence

from harness import journal, tracks
from harness.cli_args import Parser
from harness.errors import Unavailable, UserError

# Each module defines register(subparsers). The core's commands are named here; the tracks' come from their
# `kvds.commands` entry points (harness/tracks.py), between the core's own and the ones that span tracks.
CORE_COMMANDS = (
    ("doctor", "harness.commands.doctor"),
    ("map", "harness.commands.map"),
    ("restore", "harness.commands.restore"),
    ("results", "harness.commands.results"),
    ("trace", "harness.commands.trace"),
)
SPANNING_COMMANDS = (
    ("remote", "harness.remote.cli"),
    ("run", "harness.commands.run"),
    ("report", "harness.commands.report"),
)


def command_modules() -> list[tuple[str, str]]:
    """(command, module) for every `kvds` command, in --help order."""
    return [*CORE_COMMANDS, *((ep.name, ep.value) for ep in tracks.commands()), *SPANNING_COMMANDS]


def build_parser(only: str | None = None) -> Parser:
    """Every command's parser, or only command `only`'s (main() passes it when the command line names one):
    importing every track costs about a second, mostly the policy simulator's numba, which a `kvds io` or
    `kvds restore` invocation never uses."""
    parser = Parser(prog="kvds", description="Deadline-aware KV-cache scheduling on real Linux kernels.")
    parser.add_argument("--version", action="version", version="kvds 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    # commands that run other kvds command lines (remote) check them with this parser, without importing the CLI
    parser.set_defaults(parse_kvds=parser.parse_args)
    for command, name in command_modules():
        if only is not None and command != only:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # one broken track must not take the whole CLI down
            _register_broken(sub, command, name, exc)
            continue
        module.register(sub)
    return parser


def _register_broken(sub: argparse._SubParsersAction, command: str, module: str, exc: ImportError) -> None:
    """A track whose module cannot be imported: its command fails with why (exit 1: kvds's own code is broken, which
    is an error, never "unavailable") instead of breaking every other command."""

    def fail(args: argparse.Namespace) -> int:
        raise ImportError(f"the {command!r} command cannot load: {module}: {exc}")

    p = sub.add_parser(command, help=f"(broken: {exc})", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=fail)


def _sole_command(argv: Sequence[str]) -> str | None:
    """The one command this command line runs, when its parser alone can parse it: not `kvds remote` (it checks
    other command lines), not --help or a misspelt command (their messages list every command)."""
    known = {command for command, _ in command_modules()}
    first = argv[0] if argv else None
    return first if first in known and first != "remote" else None


class _Terminated(BaseException):
    pass


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def _restore() -> None:
    report = journal.restore_current()
    if report and report.failed:
        for f in report.failed:
            print(f"kvds: warning: could not restore {f} (journal kept: {report.journal}; run 'kvds restore')",
                  file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    status = 1
    old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        args = build_parser(_sole_command(argv)).parse_args(argv)
        if getattr(args, "remote_opt_in", False):  # --target/--hosts: run on those hosts instead (harness/remote)
            from harness.remote.dispatch import bind

            args.func = bind(argv, args)
        if getattr(args, "json", False):
            from harness import progress

            progress.set_quiet(True)
        status = int(args.func(args) or 0)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except UserError as exc:
        print(f"kvds: error: {exc}", file=sys.stderr)
        status = 2
    except Unavailable as exc:
        print(f"kvds: unavailable: {exc}", file=sys.stderr)
        status = 3
    except KeyboardInterrupt:
        print("kvds: interrupted; restoring kernel state", file=sys.stderr)
        status = 130
    except _Terminated:
        print("kvds: terminated; restoring kernel state", file=sys.stderr)
        status = 143
    except BrokenPipeError:
        status = 0
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("KVDS_DEBUG"):
            traceback.print_exc()
        print(f"kvds: internal error: {type(exc).__name__}: {exc} (KVDS_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        status = 1
    finally:
        try:
            _restore()
        except KeyboardInterrupt:
            _restore()
        signal.signal(signal.SIGTERM, old_term)
    return status


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
