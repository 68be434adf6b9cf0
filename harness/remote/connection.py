"""Opening an SSH connection with fabric under kvds's host-key rules.

known_hosts decides: a host whose key is recorded there connects; an unknown host is refused (paramiko's
RejectPolicy behaviour) unless --accept-new-host-key was given, in which case its key is appended to the
known_hosts file and the fingerprint is reported; a key that differs from the recorded one is always refused.
Only keys and agents authenticate: kvds never handles a password.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import os
import socket
from pathlib import Path

import paramiko
from fabric import Connection

from harness.remote.args import SshOptions
from harness.remote.targets import SshTarget


# paramiko's transport thread logs its own failures with a traceback, which logging's last resort prints on
# stderr when no handler is configured; kvds reports each failure itself, on one line
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class HostKeyRefused(Exception):
    """The host's key is unknown (and accepting was not asked for) or differs from known_hosts."""


class ConnectFailed(Exception):
    """The host could not be reached or would not let kvds in."""


def fingerprint(key: paramiko.PKey) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise HostKeyRefused(f"host key of {hostname} ({key.get_name()} {fingerprint(key)}) is not in "
                             f"{self.known_hosts}; check the fingerprint and rerun with --accept-new-host-key")


class _RecordNew(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host's key and append it to known_hosts (the explicit --accept-new-host-key)."""

    def __init__(self, known_hosts: Path, events: list[str]) -> None:
        self.known_hosts, self.events = known_hosts, events

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.events.append(f"accepted new host key of {hostname}: {key.get_name()} {fingerprint(key)} "
                           f"(recorded in {self.known_hosts})")


def _keepalive(sock: socket.socket | None) -> None:
    """Notice a host that vanishes without closing the connection within about half a minute."""
    if not isinstance(sock, socket.socket):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, val in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3), ("TCP_USER_TIMEOUT", 30000)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)


NO_BANNER = ("Error reading SSH protocol banner", "No existing session")
"""paramiko's two words for "the port took the connection but no SSH banner came": which one depends on whether
its transport thread or the client notices first."""


def _why(exc: BaseException, timeout: float) -> str:
    """One line saying why a connection failed: refused, timed out, unreachable (per address tried)."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):  # every address refused or unreachable
        return "; ".join(f"{addr[0]} port {addr[1]}: {e.strerror or e}" for addr, e in exc.errors.items())
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, paramiko.SSHException) and str(exc) in NO_BANNER:
        return f"no SSH server answered within {timeout:g} s ({exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def open_connection(target: SshTarget, opts: SshOptions, events: list[str]) -> Connection:
    """A connected fabric Connection; raises HostKeyRefused or ConnectFailed with a one-line reason."""
    identity = target.identity or opts.identity
    kwargs: dict[str, object] = {"allow_agent": True, "look_for_keys": identity is None,
                                 "banner_timeout": opts.connect_timeout, "auth_timeout": opts.connect_timeout}
    if identity:
        kwargs["key_filename"] = [os.path.expanduser(identity)]
    conn = Connection(target.host, user=target.user, port=target.port,
                      connect_timeout=max(1, math.ceil(opts.connect_timeout)), connect_kwargs=kwargs)
    if opts.known_hosts.is_file():
        try:
            conn.client.load_host_keys(str(opts.known_hosts))
        except (OSError, paramiko.SSHException) as exc:
            raise ConnectFailed(f"cannot read known_hosts {opts.known_hosts}: {exc}") from None
    policy = _RecordNew(opts.known_hosts, events) if opts.accept_new_host_key else _RejectUnknown(opts.known_hosts)
    conn.client.set_missing_host_key_policy(policy)
    try:
        conn.open()
    except HostKeyRefused:
        raise
    except paramiko.BadHostKeyException as exc:
        raise HostKeyRefused(f"host key of {target.describe()} CHANGED ({exc.key.get_name()} {fingerprint(exc.key)}, "
                             f"{opts.known_hosts} has {fingerprint(exc.expected_key)}): refusing; if the host was "
                             "reinstalled, remove its old line from known_hosts") from None
    except paramiko.AuthenticationException as exc:
        raise ConnectFailed(f"authentication as {target.user} failed ({exc}); kvds uses keys and agents only") from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        raise ConnectFailed(f"cannot connect to {target.describe()}: {_why(exc, opts.connect_timeout)}") from None
    _keepalive(conn.transport.sock if conn.transport else None)
    return conn
