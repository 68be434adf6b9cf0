"""`kvds remote hosts`'s work: the targets named, and with --check whether each can be reached (and how)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from harness.remote.args import SshOptions
from harness.remote.targets import GuestTarget, LocalTarget, SshTarget, Target
from harness.results import Filed, StoredSummary


@dataclass(frozen=True)
class HostsConfig:
    targets: tuple[Target, ...]
    ssh: SshOptions
    check: bool = False  # connect to each (known_hosts rules) and report Python and kernel


@dataclass
class HostsSummary(StoredSummary):
    """`kvds remote hosts`: one row per target."""
    hosts: list[dict[str, Any]] = field(default_factory=list)  # tag, target, kind (+ user, host, port, root for ssh;
    # + status, detail, events with --check)

    def exit_status(self) -> int:
        """0 when every checked target is ok (or none was checked), 3 when all bad ones are unavailable, else 1."""
        bad = [r for r in self.hosts if "status" in r and r["status"] != "ok"]
        return 0 if not bad else (3 if all(r["status"] == "unavailable" for r in bad) else 1)


def run(cfg: HostsConfig) -> Filed[HostsSummary]:
    rows = []
    for t in cfg.targets:
        row: dict[str, Any] = {"tag": t.tag, "target": t.describe(), "kind": t.kind}
        if isinstance(t, SshTarget):
            row.update(user=t.user, host=t.host, port=t.port, root=cfg.ssh.remote_root or t.root or "~/.kvds-remote")
        if cfg.check:
            row.update(_check(t, cfg.ssh))
        rows.append(row)
    return Filed(None, HostsSummary(rows))


def _check(t: Target, opts: SshOptions) -> dict[str, object]:
    from harness.remote.guest import guest_lab_status
    from harness.remote.scrub import scrub
    from harness.remote.sshhost import SshHost

    if isinstance(t, LocalTarget):
        return {"status": "ok", "detail": f"this machine, kernel {os.uname().release}"}
    if isinstance(t, GuestTarget):
        ready, why = guest_lab_status()
        return {"status": "ok" if ready else "unavailable", "detail": why}
    host = SshHost(t, opts)
    try:
        host.connect()
        py = host.find_python()
        return {"status": "ok", "detail": f"reachable; Python {py['version']} at {py['python']}, "
                                          f"kernel {py['kernel']}, kvds root {host.root}", "events": host.events}
    except Exception as exc:  # each host's problem is reported on its line, not raised
        return {"status": "failed", "detail": scrub(str(exc) or type(exc).__name__), "events": host.events}
    finally:
        host.close()
