"""The capability probe: which mechanisms work on this host, found by trying them where that is safe.

Probes live in `harness/probes/<area>.py`, each exporting `probes() -> list[Capability]`. Tests take their
skip reasons from here (`skip_unless`), so a skipped test says exactly what `kvds doctor` says.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import lru_cache

from harness.capability import Capability
from harness.errors import Unavailable

import harness.probes


def probe_areas() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(harness.probes.__path__) if not m.name.startswith("_"))


@lru_cache(maxsize=None)
def probe_area(area: str) -> tuple[Capability, ...]:
    mod = importlib.import_module(f"harness.probes.{area}")
    return tuple(mod.probes())


def all_capabilities() -> list[Capability]:
    out: list[Capability] = []
    for area in probe_areas():
        out.extend(probe_area(area))
    return out


@lru_cache(maxsize=None)
def _index() -> dict[str, Capability]:
    return {c.name: c for c in all_capabilities()}


def capability(name: str) -> Capability:
    """Look up one capability by name, probing its area only (cheap for tests)."""
    for area in probe_areas():
        for c in probe_area(area):
            if c.name == name:
                return c
    return Capability(name, "unavailable", "no probe knows this capability", "unknown")


def require(*names: str) -> None:
    """Raise Unavailable with the probe's reason when a needed capability is missing."""
    for n in names:
        c = capability(n)
        if not c.ok:
            raise Unavailable(f"{n} is {c.status} on this host: {c.reason}")


def skip_unless(*names: str):
    """A pytest mark skipping a test with the doctor's reason (import pytest lazily: doctor runs without it)."""
    import pytest

    for n in names:
        c = capability(n)
        if not c.ok:
            return pytest.mark.skip(reason=f"kvds doctor: {n} {c.status}: {c.reason}")
    return pytest.mark.skipif(False, reason="capabilities available")


def is_root() -> bool:
    return os.geteuid() == 0
