"""`kvds remote hosts|doctor|run|baseline`: list and check targets, probe them, run any kvds command on them.

Every experiment command that called harness.remote.add_target_args also takes --target/--hosts directly
(`kvds io bench --target ssh://root@a --target ssh://root@b`); `kvds remote run` does the same for any command.
"""

from __future__ import annotations

import argparse

from harness.cli_args import positive_float, positive_int
from harness.errors import UserError
from harness.remote import baseline_run, doctor_run, hosts_run, render, run_run
from harness.remote.args import add_target_args, add_target_options, check_resolvable, resolve_targets, ssh_options
from harness.remote.targets import Target
from harness.verbs import Verb, add


def _targets(args: argparse.Namespace) -> tuple[Target, ...]:
    if not (args.target or args.hosts):
        raise UserError("name the targets: --target local|guest|ssh://user@host[:port] (repeatable) or --hosts FILE")
    return tuple(resolve_targets(args))


def hosts_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="connect (known_hosts rules) and report Python/kernel")
    add_target_options(p)


def hosts_config(args: argparse.Namespace) -> hosts_run.HostsConfig:
    targets = _targets(args)
    if args.check:
        check_resolvable(targets)
    return hosts_run.HostsConfig(targets, ssh_options(args), check=args.check)


def doctor_config(args: argparse.Namespace) -> doctor_run.DoctorConfig:
    return doctor_run.DoctorConfig(_targets(args), ssh_options(args))


def run_arguments(p: argparse.ArgumentParser) -> None:
    add_target_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the kvds command line (after --)")


def run_config(args: argparse.Namespace) -> run_run.RunConfig:
    cmd = list(args.command)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if cmd[:1] == ["kvds"]:
        cmd = cmd[1:]
    if not cmd:
        raise UserError("no command to run: kvds remote run --target T -- <kvds command line>")
    if cmd[0] == "remote":
        raise UserError("kvds remote run cannot run `kvds remote` on the targets")
    parsed = args.parse_kvds(cmd)  # bad input is caught here, once, not on every host
    if getattr(parsed, "target", None) or getattr(parsed, "hosts", None):
        raise UserError("put the target options before --, not in the command the hosts run")
    return run_run.RunConfig(tuple(cmd), _targets(args), ssh_options(args), json_flag=hasattr(parsed, "json"))


def baseline_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=positive_float, default=2.0, metavar="S", help="seconds to measure (default 2)")
    p.add_argument("--file-mib", type=positive_int, default=64, metavar="MIB", help="scratch file size (default 64)")
    p.add_argument("--seed", type=int, default=0)
    add_target_args(p)


HOSTS = Verb("hosts", "list the targets; with --check, connect and report each", hosts_arguments, hosts_config,
             hosts_run.run, render.hosts, hosts_run.HostsSummary, exit_status=lambda s: s.exit_status())
DOCTOR = Verb("doctor", "ship kvds to the targets and compare their `kvds doctor` side by side", add_target_options,
              doctor_config, doctor_run.run, render.doctor, doctor_run.DoctorSummary, results_line=False,
              exit_status=lambda s: s.exit_status())
RUN = Verb("run", "run any kvds command on the targets: kvds remote run --target T -- io bench", run_arguments,
           run_config, run_run.run, render.run, run_run.RunSummary, results_line=False,
           exit_status=lambda s: s.exit_status())
BASELINE = Verb("baseline", "short reference measurement: 4 KiB O_DIRECT read and page first-touch latency",
                baseline_arguments, lambda a: baseline_run.BaselineConfig(a.duration, a.file_mib, a.seed),
                baseline_run.run, render.baseline, baseline_run.BaselineSummary)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("remote", help="run kvds on other hosts (ssh), the QEMU guest, or here")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for verb in (HOSTS, DOCTOR, RUN, BASELINE):
        add(verbs, verb)
