"""How reports print numbers: an estimate as "value [lo, hi]", tolerant of plain numbers and missing data."""

from __future__ import annotations


def estimate(d: object, scale: float = 1.0) -> str:
    """{"value", "lo", "hi"} (or a bare number) as "v [lo, hi]"; "-" when absent."""
    if isinstance(d, bool):
        return str(d)
    if isinstance(d, (int, float)):
        return f"{d * scale:.4g}"
    if not isinstance(d, dict) or d.get("value") is None:
        return "-"
    v, lo, hi = d.get("value"), d.get("lo"), d.get("hi")
    if lo is None or hi is None or lo != lo or hi != hi:
        return f"{v * scale:.4g}"
    return f"{v * scale:.4g} [{lo * scale:.3g}, {hi * scale:.3g}]"


def value(d: object, *path: str) -> float | None:
    """A number at a path of dict keys, an estimate dict's value, or None."""
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    if isinstance(d, dict):
        d = d.get("value")
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None
