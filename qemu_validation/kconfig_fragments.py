"""Kconfig fragments: parse them, and check that every option they ask for survived `make olddefconfig`.

Kconfig silently drops an option whose dependencies are missing; a guest kernel without, say, DEBUG_FS would boot
and then fail in confusing ways, so the build refuses a configuration that lost any requested option.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import UserError

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse(text: str, origin: str = "<fragment>") -> dict[str, str]:
    """Option -> value ("y", "m", "n" for `is not set`, or the literal); bad lines raise UserError naming file:line."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if m := _UNSET.match(line):
            out[m.group(1)] = "n"
        elif m := _SET.match(line):
            out[m.group(1)] = m.group(2)
        elif line.startswith("#"):
            continue
        else:
            raise UserError(f"{origin}:{n}: not a Kconfig line: {line[:60]!r}")
    return out


def load(path: Path) -> dict[str, str]:
    try:
        return parse(path.read_text(), str(path))
    except OSError as exc:
        raise UserError(f"cannot read config fragment {path}: {exc.strerror}") from None


def missing(wanted: dict[str, str], config_text: str) -> list[str]:
    """Requested options the final .config does not have as requested."""
    have = parse("\n".join(l for l in config_text.splitlines() if _SET.match(l) or _UNSET.match(l)))
    return [f"{k}={v}" for k, v in wanted.items() if have.get(k, "n") != v]
