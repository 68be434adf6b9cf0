"""The target options every experiment command can take, and the argv a host runs once they are removed."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness.errors import UserError
from harness.remote.targets import LocalTarget, SshTarget, Target, check_unique, parse_hosts_file, parse_target

NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
"""getaddrinfo's answers that the name itself does not exist (a typo, or a *.invalid name, RFC 6761)."""

# option -> takes a value; these are removed from the argv a host runs
TARGET_OPTIONS: dict[str, bool] = {
    "--target": True, "--hosts": True, "--identity": True, "--known-hosts": True, "--accept-new-host-key": False,
    "--remote-root": True, "--deps": True, "--connect-timeout": True, "--guest-timeout": True,
}
MAX_GUEST_TIMEOUT_S = 24 * 3600.0
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")


def _timeout(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < v <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 3600 seconds")
    return v


def add_target_args(parser: argparse.ArgumentParser) -> None:
    """Opt a command in to remote execution: `--target`/`--hosts` then run it on those hosts (see README)."""
    add_target_options(parser)
    parser.set_defaults(remote_opt_in=True)


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """The target options alone (for commands whose subject is the targets, like `kvds remote doctor`)."""
    g = parser.add_argument_group("targets (run this command on other hosts; see harness/remote/README.md)")
    g.add_argument("--target", action="append", metavar="TARGET",
                   help="local, guest or ssh://user@host[:port] (repeatable)")
    g.add_argument("--hosts", metavar="FILE", help="file with one target a line (name=, root=, identity= options)")
    g.add_argument("--identity", metavar="KEY", help="private key file for ssh targets (default: agent, ~/.ssh keys)")
    g.add_argument("--known-hosts", metavar="FILE", help=f"known_hosts file (default {DEFAULT_KNOWN_HOSTS})")
    g.add_argument("--accept-new-host-key", action="store_true",
                   help="accept and record the key of a host not yet in known_hosts (a changed key is always refused)")
    g.add_argument("--remote-root", metavar="DIR", help="directory kvds uses on ssh hosts (default ~/.kvds-remote)")
    g.add_argument("--deps", choices=("ship", "index"), default="ship",
                   help="ship: copy dependency wheels from here (hosts need no internet); index: hosts pip-install them")
    g.add_argument("--connect-timeout", type=_timeout, default=15.0, metavar="S", help="SSH connect timeout (default 15)")
    g.add_argument("--guest-timeout", type=_guest_timeout, metavar="S",
                   help="end the --target guest run after S seconds (default: what the command's plan needs, at "
                        "least 1800; `--dry-run` says it)")


def _guest_timeout(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < v <= MAX_GUEST_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and {MAX_GUEST_TIMEOUT_S:.0f} seconds")
    return v


@dataclass(frozen=True)
class SshOptions:
    known_hosts: Path
    accept_new_host_key: bool = False
    identity: str | None = None
    remote_root: str | None = None
    deps: str = "ship"
    connect_timeout: float = 15.0


def ssh_options(args: argparse.Namespace) -> SshOptions:
    kh = Path(os.path.expanduser(getattr(args, "known_hosts", None) or str(DEFAULT_KNOWN_HOSTS)))
    ident = getattr(args, "identity", None)
    if ident and not Path(ident).expanduser().is_file():
        raise UserError(f"identity file {ident} does not exist")
    return SshOptions(known_hosts=kh, accept_new_host_key=bool(getattr(args, "accept_new_host_key", False)),
                      identity=ident, remote_root=getattr(args, "remote_root", None),
                      deps=getattr(args, "deps", "ship") or "ship",
                      connect_timeout=float(getattr(args, "connect_timeout", 15.0) or 15.0))


def resolve_targets(args: argparse.Namespace) -> list[Target]:
    """The targets the options name (none given: just this machine)."""
    targets: list[Target] = [parse_target(t) for t in (getattr(args, "target", None) or [])]
    if getattr(args, "hosts", None):
        targets += parse_hosts_file(args.hosts)
    return check_unique(targets) if targets else [LocalTarget()]


def check_resolvable(targets: Sequence[Target]) -> None:
    """Refuse, before anything runs or is written, an ssh target whose host name does not exist: bad input (exit 2).

    Only the resolver's "no such name" counts. A resolver that cannot be reached (EAI_AGAIN) and a host that
    resolves but refuses or times out are not the user's mistake: that host fails at connect, like any
    unreachable one (exit 1, its reason on one line)."""
    for t in targets:
        if not isinstance(t, SshTarget):
            continue
        try:
            socket.getaddrinfo(t.host, t.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno in NO_SUCH_NAME:
                raise UserError(f"target {t.describe()}: host name {t.host!r} does not resolve ({exc.strerror})") from None
            # any other resolver failure is left to the connect stage, which reports it as that host's failure


def only_local(targets: Sequence[Target]) -> bool:
    return len(targets) == 1 and isinstance(targets[0], LocalTarget)


def strip_target_argv(argv: Sequence[str]) -> list[str]:
    """argv without the target options (what each host runs). Abbreviated option names are caught by the
    caller re-parsing the result."""
    out: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        name, eq, _ = a.partition("=")
        if name in TARGET_OPTIONS:
            i += 2 if (TARGET_OPTIONS[name] and not eq) else 1  # the option, and its value when separate
            continue
        out.append(a)
        i += 1
    return out


def with_json(argv: list[str]) -> list[str]:
    """argv with --json added (before a `--` separator, where options still parse)."""
    if "--json" in argv:
        return argv
    if "--" in argv:
        k = argv.index("--")
        return argv[:k] + ["--json"] + argv[k:]
    return argv + ["--json"]
