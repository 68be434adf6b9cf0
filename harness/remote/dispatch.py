"""The hook harness/cli.py calls: a command whose options name non-local targets runs there instead of here.

Each host runs the same argv minus the target options, with --json, as root; the results come home tagged.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from harness.emit import emit
from harness.errors import UserError
from harness.remote.args import (SshOptions, check_resolvable, only_local, resolve_targets, ssh_options,
                                 strip_target_argv)
from harness.remote.guest import DEFAULT_LAB, GUEST_TIMEOUT_S, guest_timeout
from harness.remote.targets import Target
from harness.results import ResultStore, Run

if TYPE_CHECKING:
    from harness.remote.execute import HostOutcome

Handler = Callable[[argparse.Namespace], int]


def bind(argv: Sequence[str], args: argparse.Namespace) -> Handler:
    """The handler to run: the command itself (only `local`), or a dispatcher to the targets."""
    targets = resolve_targets(args)
    if only_local(targets):
        return args.func
    host_argv = strip_target_argv(argv)
    again = args.parse_kvds(host_argv)
    if getattr(again, "target", None) or getattr(again, "hosts", None):
        raise UserError("write the target options out in full (--target, --hosts): abbreviations cannot be removed "
                        "from the command the hosts run")
    opts = ssh_options(args)
    json_out = bool(getattr(args, "json", False))
    json_flag = hasattr(args, "json")
    lab = getattr(args, "guest_lab", DEFAULT_LAB)  # a track's parser names the lab kernel its command needs
    timeout = guest_timeout(args)
    verb = getattr(args, "verb", None)  # harness/verbs.py: the command's own renderer and summary type
    warm = getattr(args, "guest_warm", None)  # a track's parser: the host command that compiles what the guest needs
    return lambda _args: run_on_targets(host_argv, targets, opts, json_out=json_out, json_flag=json_flag,
                                        guest_lab=lab, guest_timeout_s=timeout, verb=verb, guest_warm=warm)


def run_on_targets(host_argv: Sequence[str], targets: Sequence[Target], opts: SshOptions, *, json_out: bool,
                   json_flag: bool = True, guest_lab: str = DEFAULT_LAB, guest_timeout_s: float = GUEST_TIMEOUT_S,
                   verb: Any = None, guest_warm: Callable[[list[str]], list[str]] | None = None) -> int:
    """`kvds <command> --target ...`: run `kvds host_argv` on every target in parallel, print the side-by-side
    summary, then each fetched run of the command as the command itself prints it (or the --json envelope); the
    exit status of `exit_status`. Before a guest boots, `guest_warm(host_argv)` (the command's declaration of what
    compiles its numba functions) fills the guest's numba cache here when the sources changed
    (harness/remote/guest_numba.py)."""
    from harness.remote.summary import as_json, print_summary

    prepare_guest(host_argv, targets, guest_warm, guest_lab)
    record, outcomes = dispatch(host_argv, targets, opts, json_flag=json_flag, guest_lab=guest_lab,
                                guest_timeout_s=guest_timeout_s)
    store = ResultStore()
    if json_out:
        emit(record, as_json(outcomes, str(record.path)), True)
    else:
        print_summary(outcomes, store, str(record.path), f"kvds {' '.join(host_argv)}")
        if verb is not None:
            render_fetched(verb, outcomes, store)
    return exit_status(o.status for o in outcomes)


def prepare_guest(host_argv: Sequence[str], targets: Sequence[Target],
                  guest_warm: Callable[[list[str]], list[str]] | None, guest_lab: str = DEFAULT_LAB) -> str | None:
    """Fill the guest's numba cache on this host when a guest target is among the targets, the command declares a
    warm-up and the lab can boot (else the guest target says why not itself); what happened, or None."""
    from harness.remote.guest import guest_lab_status
    from harness.remote.guest_numba import fill

    if guest_warm is None or not any(t.kind == "guest" for t in targets) or not guest_lab_status(guest_lab)[0]:
        return None
    return fill(guest_warm(list(host_argv)))


def render_fetched(verb: Any, outcomes: Sequence[HostOutcome], store: ResultStore) -> list[str]:
    """Print every fetched run whose summary is the command's (it has each field the verb's summary type requires)
    with the verb's own renderer, under a line naming the host and run: a guest's or ssh host's table reads as it
    would here. Returns the runs rendered."""
    required = [f.name for f in dataclasses.fields(verb.summary)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    done = []
    for o in outcomes:
        for name in o.runs:
            summary = Run(store.root / name).summary
            if not isinstance(summary, dict) or not all(k in summary for k in required):
                continue
            print(f"\n[{o.tag}] {name}:")
            verb.render(verb.summary.from_json(summary))
            done.append(name)
    return done


def dispatch(host_argv: Sequence[str], targets: Sequence[Target], opts: SshOptions, *, json_flag: bool = True,
             guest_lab: str = DEFAULT_LAB, guest_timeout_s: float = GUEST_TIMEOUT_S
             ) -> tuple[Run, list[HostOutcome]]:
    """Run `kvds host_argv` on every target in parallel: the invocation record (a run) and each host's outcome."""
    from harness.remote.execute import Executor

    check_resolvable(targets)  # a host name that does not exist is bad input: refused before the record is made
    store = ResultStore()
    record = store.new_run("remote", {"argv": list(host_argv), "targets": [t.describe() for t in targets]},
                           host=socket.gethostname())
    outcomes = Executor(host_argv, targets, opts, store, record, json_flag=json_flag, guest_lab=guest_lab,
                        guest_timeout_s=guest_timeout_s).run()
    return record, list(outcomes)


def exit_status(statuses: Iterable[str]) -> int:
    """0 when every target succeeded, 3 when the only problems are unavailable targets, else 1."""
    seen = set(statuses)
    if seen == {"ok"}:
        return 0
    if "failed" not in seen:
        return 3
    return 1
