"""`kvds remote hosts|doctor|run|baseline`: list and check targets, probe them, run any kvds command on them.

Every experiment command that called harness.remote.add_target_args also takes --target/--hosts directly
(`kvds io bench --target ssh://root@a --target ssh://root@b`); `kvds remote run` does the same for any command.
"""

from __future__ import annotations

import argparse

from harness.cli_args import add_json_flag, positive_float, positive_int
from harness.emit import emit
from harness.errors import UserError
from harness.remote.args import (add_target_args, add_target_options, check_resolvable, resolve_targets,
                                 ssh_options)
from harness.remote.targets import GuestTarget, LocalTarget, SshTarget, Target


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("remote", help="run kvds on other hosts (ssh), the QEMU guest, or here")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    hosts = verbs.add_parser("hosts", help="list the targets; with --check, connect and report each")
    hosts.add_argument("--check", action="store_true", help="connect (known_hosts rules) and report Python/kernel")
    add_target_options(hosts)
    add_json_flag(hosts)
    hosts.set_defaults(func=run_hosts)

    doc = verbs.add_parser("doctor", help="ship kvds to the targets and compare their `kvds doctor` side by side")
    add_target_options(doc)
    add_json_flag(doc)
    doc.set_defaults(func=run_doctor)

    run = verbs.add_parser("run", help="run any kvds command on the targets: kvds remote run --target T -- io bench")
    add_target_options(run)
    add_json_flag(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="the kvds command line (after --)")
    run.set_defaults(func=run_any)

    base = verbs.add_parser("baseline", help="short reference measurement: 4 KiB O_DIRECT read and page first-touch latency")
    base.add_argument("--duration", type=positive_float, default=2.0, metavar="S", help="seconds to measure (default 2)")
    base.add_argument("--file-mib", type=positive_int, default=64, metavar="MIB", help="scratch file size (default 64)")
    base.add_argument("--seed", type=int, default=0)
    add_target_args(base)
    add_json_flag(base)
    base.set_defaults(func=run_baseline)


def _targets(args: argparse.Namespace) -> list[Target]:
    if not (args.target or args.hosts):
        raise UserError("name the targets: --target local|guest|ssh://user@host[:port] (repeatable) or --hosts FILE")
    return resolve_targets(args)


def run_hosts(args: argparse.Namespace) -> int:
    targets = _targets(args)
    if args.check:
        check_resolvable(targets)
    rows = []
    opts = ssh_options(args)
    for t in targets:
        row: dict[str, object] = {"tag": t.tag, "target": t.describe(), "kind": t.kind}
        if isinstance(t, SshTarget):
            row.update(user=t.user, host=t.host, port=t.port, root=opts.remote_root or t.root or "~/.kvds-remote")
        if args.check:
            row.update(_check(t, args))
        rows.append(row)
    if args.json:
        emit(None, {"hosts": rows}, True)
    else:
        for r in rows:
            extra = "" if not args.check else f"  {r['status']}: {r['detail']}"
            print(f"{r['tag']:<20} {r['target']}{extra}")
            for e in r.get("events", []):
                print(f"{'':<20} {e}")
    bad = [r for r in rows if args.check and r["status"] != "ok"]
    return 0 if not bad else (3 if all(r["status"] == "unavailable" for r in bad) else 1)


def _check(t: Target, args: argparse.Namespace) -> dict[str, object]:
    from harness.remote.guest import guest_lab_status
    from harness.remote.scrub import scrub
    from harness.remote.sshhost import SshHost

    if isinstance(t, LocalTarget):
        import os

        return {"status": "ok", "detail": f"this machine, kernel {os.uname().release}"}
    if isinstance(t, GuestTarget):
        ready, why = guest_lab_status()
        return {"status": "ok" if ready else "unavailable", "detail": why}
    host = SshHost(t, ssh_options(args))
    try:
        host.connect()
        py = host.find_python()
        return {"status": "ok", "detail": f"reachable; Python {py['version']} at {py['python']}, kernel {py['kernel']}, "
                                          f"kvds root {host.root}", "events": host.events}
    except Exception as exc:  # each host's problem is reported on its line, not raised
        return {"status": "failed", "detail": scrub(str(exc) or type(exc).__name__), "events": host.events}
    finally:
        host.close()


def run_doctor(args: argparse.Namespace) -> int:
    from harness.remote.dispatch import run_on_targets

    return run_on_targets(["doctor"], _targets(args), ssh_options(args), json_out=args.json, all_caps=True,
                          title="kvds doctor, side by side")


def run_any(args: argparse.Namespace) -> int:
    from harness.remote.dispatch import run_on_targets

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
    return run_on_targets(cmd, _targets(args), ssh_options(args), json_out=args.json,
                          json_flag=hasattr(parsed, "json"))


def run_baseline(args: argparse.Namespace) -> int:
    from harness.remote.baseline import run_baseline as measure

    run = measure(args.duration, args.file_mib, args.seed)
    if args.json:
        emit(run, run.summary, True)
    else:
        s = run.summary
        print(f"host baseline {run.run_id}")
        for name, d in s.items():
            print(f"  {name:<18} n={d['count']:<7} p50 {d['p50_us']:.1f} us  p90 {d['p90_us']:.1f} us  "
                  f"p99 {d['p99_us']:.1f} us [{d['p99_ci_us'][0]:.1f}, {d['p99_ci_us'][1]:.1f}]")
        print(f"  results: {run.path}")
    return 0
