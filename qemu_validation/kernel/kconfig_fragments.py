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


_DEFINE = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$", re.M)


def defined_symbols(tree: Path) -> set[str]:
    """Every CONFIG_ symbol some Kconfig file of the source tree defines."""
    found: set[str] = set()
    for path in tree.rglob("Kconfig*"):
        if path.is_file() and ".git" not in path.parts:
            found.update("CONFIG_" + s for s in _DEFINE.findall(path.read_text(errors="replace")))
    return found


def split_missing(lost: list[str], tree: Path) -> tuple[list[str], list[str]]:
    """(options the source defines but the configuration lost: refused, options this source has no such symbol
    for: recorded). The fragments serve several kernels: SLUB_RCU_DEBUG, say, only exists from 6.12 on."""
    known = defined_symbols(tree)
    return [x for x in lost if x.split("=")[0] in known], [x for x in lost if x.split("=")[0] not in known]
