"""How reports print numbers: an estimate as "value [lo, hi]", tolerant of plain numbers and missing data.

Missing is missing: no value prints "-" with the reason stored beside it ("n too small: ..."), a value without an
interval says it is a point estimate, and a NaN never turns into 0 or "nan".
"""

from __future__ import annotations

import math


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def missing(reason: str | None) -> str:
    """A table cell for a figure that is not there, with why."""
    return f"- ({reason})" if reason else "-"


def sig(x: float, digits: int) -> str:
    """x to `digits` significant digits, never in e-notation below 10^9: 1140 stays "1140" (a latency in us; no thousands separator, which would read as a list separator inside "[lo, hi]"), not
    "1.14e+03"; fractions keep their significant digits ("0.0523")."""
    if x != 0 and 10 ** digits <= abs(x) < 1e9:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def estimate(d: object, scale: float = 1.0) -> str:
    """{"value", "lo", "hi"} (or a bare number) as "v [lo, hi]"; "-" (with its reason) when absent."""
    if isinstance(d, bool):
        return str(d)
    if isinstance(d, (int, float)):
        return sig(d * scale, 4) if _num(d) else "-"
    if not isinstance(d, dict):
        return "-"
    v, lo, hi = d.get("value"), d.get("lo"), d.get("hi")
    if not _num(v):
        return missing(d.get("reason") or ("no data" if d else None))
    if not (_num(lo) and _num(hi)):
        return f"{sig(v * scale, 4)} (point estimate)"
    return f"{sig(v * scale, 4)} [{sig(lo * scale, 3)}, {sig(hi * scale, 3)}]"


def value(d: object, *path: str) -> float | None:
    """A finite number at a path of dict keys, an estimate dict's value, or None (never NaN)."""
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    if isinstance(d, dict):
        d = d.get("value")
    return float(d) if _num(d) else None


def number(v: object, digits: str = ".4g", unit: str = "", why: str = "no data") -> str:
    """A plain number cell: "-" with a reason for None/NaN."""
    return f"{v:{digits}}{unit}" if _num(v) else missing(why)
