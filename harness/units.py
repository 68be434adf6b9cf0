"""The one size parser: every option that takes bytes (--fast-bytes, --sizes, --kv-mib's siblings) reads it here.

Binary units, because kernel and device sizes are: K, KB, KiB = 2^10; M, MB, MiB = 2^20; G, GB, GiB = 2^30;
T, TB, TiB = 2^40 (case-insensitive). "MB" and "MiB" both mean 2^20: a user typing `--fast-bytes 512M` and
`--sizes 512M` gets the same number of bytes. A bare number is bytes; fractions are allowed ("1.5G") and rounded
down to a whole byte.
"""

from __future__ import annotations

import math
import re

from harness.errors import UserError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*$")
_UNITS = {"": 1, "b": 1}
for _i, _p in enumerate("kmgt", start=1):
    for _suffix in (_p, _p + "b", _p + "ib"):
        _UNITS[_suffix] = 1 << (10 * _i)


def parse_size(text: str | int, what: str = "size") -> int:
    """'64MiB', '64M', '64MB', '1.5G', '4096' -> bytes (binary units; see the module docstring). A zero, negative
    or unreadable size is a UserError naming `what`."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise UserError(f"{what} {text!r} must be positive")
        return text
    m = _SIZE.match(str(text))
    unit = (m.group(2) or "").lower() if m else ""
    if not m or unit not in _UNITS:
        raise UserError(f"{what} {text!r} is not a size (examples: 4096, 16K, 64MiB, 1.5G; K/M/G are powers of 1024)")
    value = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value < 1:
        raise UserError(f"{what} {text!r} must be at least one byte")
    return int(value)


def format_size(n: int) -> str:
    """Bytes as the largest binary unit that divides them, e.g. 16384 -> '16K', 3 << 20 -> '3M'."""
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
