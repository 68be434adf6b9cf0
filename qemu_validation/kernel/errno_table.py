"""The register parser's errno table as the kernel keeps it (mm/mm_intent_kunit.c), as data for the validator.

The KUnit suite runs the kernel's parser over this table at boot; `kvds qemu validate` hands the same rows to the
in-guest validator, which writes each rejected line to the real register file and checks its own reference model
(the one its 10,000 random lines are judged by) against every row. So the model is never only a hand port.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

KUNIT_FILE = "mm/mm_intent_kunit.c"
_ARRAY = re.compile(r"mm_intent_parse_cases\[\]\s*=\s*\{(.*?)\n\};", re.S)
_ROW = re.compile(r'\{\s*((?:"(?:[^"\\]|\\.)*"\s*)+),\s*(0|-E[A-Z0-9]+)\s*\}')
_LIT = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESC = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)")
_SIMPLE = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, '"': 34, "'": 39, "a": 7, "b": 8, "f": 12, "v": 11}


class TableError(Exception):
    """The source does not hold the table in the expected form."""


def c_string(body: str) -> bytes:
    """The bytes of a C string literal's body (escapes as C reads them)."""
    out = bytearray()
    pos = 0
    for m in _ESC.finditer(body):
        out += body[pos:m.start()].encode()
        e = m.group(1)
        if e[0] == "x":
            out.append(int(e[1:], 16) & 0xFF)
        elif e[0] in "01234567":
            out.append(int(e, 8) & 0xFF)
        else:
            out.append(_SIMPLE[e])
        pos = m.end()
    out += body[pos:].encode()
    return bytes(out)


def rows(source: str) -> list[tuple[bytes, int]]:
    """(line, errno) for each row of mm_intent_parse_cases; errno 0 means the line is well formed."""
    import errno as errno_mod
    m = _ARRAY.search(source)
    if not m:
        raise TableError(f"no mm_intent_parse_cases table in {KUNIT_FILE}")
    out = []
    for r in _ROW.finditer(m.group(1)):
        line = b"".join(c_string(lit) for lit in _LIT.findall(r.group(1)))
        code = r.group(2)
        out.append((line, 0 if code == "0" else getattr(errno_mod, code[1:])))
    if not out:
        raise TableError("the mm_intent_parse_cases table has no rows")
    return out


def from_patch(text: str) -> str:
    """The added text of KUNIT_FILE in a git format-patch mail."""
    m = re.search(rf"^\+\+\+ b/{re.escape(KUNIT_FILE)}\n(.*?)(?=^diff --git |\Z)", text, re.S | re.M)
    if not m:
        raise TableError(f"the patch does not add {KUNIT_FILE}")
    return "\n".join(l[1:] for l in m.group(1).splitlines() if l.startswith("+"))


def from_commit(tree: Path, commit: str, path: str = KUNIT_FILE) -> str:
    """A file of the built commit, read from the build's workspace repository."""
    p = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=tree, capture_output=True, text=True)
    if p.returncode != 0:
        raise TableError(f"{path} is not in commit {commit[:12]}: {p.stderr.strip()[-200:]}")
    return p.stdout


def to_file(table: list[tuple[bytes, int]]) -> str:
    """The validator's --table format: one row a line, "<errno> <line as hex>" ("-" for an empty line)."""
    return "".join(f"{err} {line.hex() or '-'}\n" for line, err in table)
