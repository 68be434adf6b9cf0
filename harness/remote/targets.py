"""Where a kvds command runs: this machine, the QEMU guest lab, or a host reached over SSH.

Targets are written `local`, `guest`, `ssh://[user@]host[:port]` (or `user@host[:port]` in a hosts file). A
hosts file has one target a line, `#` comments, and optional `key=value` words after the target: `name=` (the
tag results are filed under), `root=` (the directory kvds uses on that host), `identity=` (a private key file).
Passwords are refused outright: kvds authenticates with keys or an SSH agent only, so none can leak.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import UserError
from harness.remote.guest import guest_clock

TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
HOST_OPTIONS = ("name", "root", "identity")


@dataclass(frozen=True)
class LocalTarget:
    tag: str = "local"
    kind: str = "local"

    def describe(self) -> str:
        return "local"


@dataclass(frozen=True)
class GuestTarget:
    tag: str = "guest"
    kind: str = "guest"

    def describe(self) -> str:
        return "guest (QEMU lab)"


@dataclass(frozen=True)
class SshTarget:
    host: str
    user: str = "root"
    port: int = 22
    tag: str = ""
    root: str | None = None  # remote directory for kvds (venv, journals, results); default ~/.kvds-remote
    identity: str | None = None
    kind: str = field(default="ssh")

    def describe(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{self.user}@{h}" + (f":{self.port}" if self.port != 22 else "")

    @property
    def needs_sudo(self) -> bool:
        return self.user != "root"


Target = LocalTarget | GuestTarget | SshTarget


def _default_tag(host: str, port: int) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "-", host).strip("-") or "host"
    return base if port == 22 else f"{base}-{port}"


def _redacted(text: str) -> str:
    return re.sub(r"//([^:@/]*):[^@/]*@", r"//\1:***@", text)


def parse_target(text: str, options: dict[str, str] | None = None) -> Target:
    """One target from its text form; options are a hosts file line's key=value words."""
    options = dict(options or {})
    t = text.strip()
    if not t:
        raise UserError("empty target (use local, guest or ssh://user@host[:port])")
    if t in ("local", "guest"):
        if options:
            raise UserError(f"target {t} takes no options (got {', '.join(sorted(options))})")
        if t == "guest":
            guest_clock()  # KVDS_GUEST_CLOCK is bad input of this target: refused here, before any host runs
        return LocalTarget() if t == "local" else GuestTarget()
    if "://" not in t:
        t = "ssh://" + t
    try:
        u = urlsplit(t)
        port = u.port or 22
    except ValueError as exc:
        raise UserError(f"bad target {_redacted(text)!r}: {exc}") from None
    if u.scheme != "ssh":
        raise UserError(f"bad target {_redacted(text)!r}: only local, guest and ssh:// targets exist")
    if u.password is not None:
        raise UserError(f"target {_redacted(text)}: passwords are not accepted; use a key (--identity) or an SSH agent")
    if not u.hostname or u.path not in ("", "/") or u.query or u.fragment:
        raise UserError(f"bad target {_redacted(text)!r}: expected ssh://[user@]host[:port]")
    for k in options:
        if k not in HOST_OPTIONS:
            raise UserError(f"target {text}: unknown option {k!r} (options: {', '.join(HOST_OPTIONS)})")
    tag = options.get("name") or _default_tag(u.hostname, port)
    if not TAG_RE.match(tag):
        raise UserError(f"target {text}: name {tag!r} must be letters, digits, '.', '_' or '-'")
    return SshTarget(host=u.hostname, user=u.username or "root", port=port, tag=tag,
                     root=options.get("root"), identity=options.get("identity"))


def parse_hosts_file(path: str | Path) -> list[Target]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UserError(f"cannot read hosts file {p}: {exc.strerror or exc}") from None
    out: list[Target] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UserError(f"{p}:{n}: {exc}") from None
        opts = {}
        for w in words[1:]:
            k, sep, v = w.partition("=")
            if not sep or not v:
                raise UserError(f"{p}:{n}: expected key=value after the target, got {w!r}")
            opts[k] = v
        try:
            out.append(parse_target(words[0], opts))
        except UserError as exc:
            raise UserError(f"{p}:{n}: {exc}") from None
    if not out:
        raise UserError(f"hosts file {p} names no targets")
    return out


def check_unique(targets: list[Target]) -> list[Target]:
    seen: dict[str, Target] = {}
    for t in targets:
        if t.tag in seen:
            raise UserError(f"two targets share the tag {t.tag!r} ({seen[t.tag].describe()}, {t.describe()}): "
                            "give one a name= in the hosts file")
        seen[t.tag] = t
    return targets
