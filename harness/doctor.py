"""The capability probe: which mechanisms work on this host, found by trying them where that is safe.

Probes live in `harness/probes/<area>.py` (the host's mechanisms) and in the tracks (their own tools, registered
as `kvds.probes` entry points, harness/tracks.py), each a `probes() -> list[Capability]`. Tests gate on the
same answers (`skip_unless`), so a skipped test says exactly what `kvds doctor` says.

Three rules keep a bug from looking like a missing mechanism:
- an exception inside a probe is status "error" (with its traceback), never "unavailable";
- an unknown capability name raises UnknownCapability (a typo in a test or a stage is kvds's bug);
- with CI=true, a capability the host kind's list (`harness/host_kinds/<kind>.toml`) says this kind of host
  has must be available: a test gated on it fails instead of skipping.
KVDS_HIDE_CAPABILITIES=name,name makes the doctor report those names unavailable, to check that CI notices.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Literal

from harness import tracks
from harness.capability import Capability, kvds_error
from harness.errors import Unavailable, UserError

import harness.probes

HIDE_ENV = "KVDS_HIDE_CAPABILITIES"
HOST_KIND_ENV = "KVDS_HOST_KIND"
DEFAULT_HOST_KIND = "python"
HOST_KINDS_DIR = Path(__file__).with_name("host_kinds")

Action = Literal["run", "skip", "fail"]


class UnknownCapability(LookupError):
    """A capability name no probe reports: a typo in kvds (a test, a stage's needs), not a missing mechanism."""


class ProbeError(RuntimeError):
    """kvds failed while probing a capability it needs (status "error"): a bug to fix, not a host to skip."""


def _core_areas() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(harness.probes.__path__) if not m.name.startswith("_")]


def probe_areas() -> list[str]:
    return sorted(set(_core_areas()) | set(tracks.probe_areas()))


@lru_cache(maxsize=None)
def probe_area(area: str) -> tuple[Capability, ...]:
    """An area's answers as probed (no hiding): the core's probe module, then the tracks' probes of that area.
    A probe that raises (or fails to import) becomes one error row for the area."""
    sources = [(f"harness.probes.{area}", lambda: importlib.import_module(f"harness.probes.{area}").probes)
               ] if area in _core_areas() else []
    sources += [(ep.value, ep.load) for ep in tracks.probe_areas().get(area, [])]
    out: list[Capability] = []
    _probing.append(area)
    try:
        for where, load in sources:
            try:
                out += load()()
            except Exception as exc:  # kvds's own probe code failed: report it, loudly, as an error
                out.append(kvds_error(area_row(area), f"probing area {area!r} ({where})", area, exc))
    finally:
        _probing.pop()
    return tuple(out)


# The areas being probed right now: a probe that asks the doctor about another capability (the io model lab asks
# about QEMU) must not re-run the hidden-name check, which probes every area, its own (half-probed) one included.
_probing: list[str] = []


def area_row(area: str) -> str:
    """The name of the row that stands for a whole probe area whose module raised."""
    return f"{area}.*"


def hidden() -> frozenset[str]:
    """Names KVDS_HIDE_CAPABILITIES asks the doctor to report unavailable (read on every call: tests set it)."""
    return frozenset(n.strip() for n in os.environ.get(HIDE_ENV, "").split(",") if n.strip())


def _hide(c: Capability) -> Capability:
    if c.name not in hidden() or c.is_error:
        return c
    return Capability(c.name, "unavailable", f"hidden by {HIDE_ENV} (the probe says {c.status}: {c.reason})",
                      c.area)


def _check_hidden_names() -> None:
    """A hidden name no probe reports is a typo in the switch: bad input (probes every area, so only when set)."""
    if not hidden() or _probing:
        return
    unknown = sorted(hidden() - {c.name for a in probe_areas() for c in probe_area(a)})
    if unknown:
        raise UserError(f"{HIDE_ENV} names unknown capabilities: {', '.join(unknown)} (see kvds doctor --json)")


def area_capabilities(area: str) -> list[Capability]:
    """An area's answers as `kvds doctor` reports them (hidden names unavailable)."""
    _check_hidden_names()
    return [_hide(c) for c in probe_area(area)]


def all_capabilities() -> list[Capability]:
    return [c for area in probe_areas() for c in area_capabilities(area)]


def capability(name: str, area: str | None = None) -> Capability:
    """Look up one capability by name. Raises UnknownCapability for a name no probe reports.

    area: probe that area first (the guest lab's VM bench needs only memory answers; probing eBPF and I/O
    under TCG+KASAN costs minutes)."""
    _check_hidden_names()
    broken = []
    areas = probe_areas()
    for a in sorted(areas, key=lambda a: a != area):
        for c in probe_area(a):
            if c.name == name:
                return _hide(c)
            if c.name == area_row(a):
                broken.append(c)
    if broken:  # the name may belong to an area whose probe crashed: that is the error to report
        raise ProbeError(f"capability {name!r} not found; probing failed: " + "; ".join(c.reason for c in broken))
    raise UnknownCapability(f"no probe reports a capability named {name!r} (kvds doctor --json lists them)")


def require(*names: str, area: str | None = None) -> None:
    """Raise Unavailable with the probe's reason when a needed capability is missing, ProbeError on a kvds error."""
    for n in names:
        c = capability(n, area)
        if c.is_error:
            raise ProbeError(f"{n}: {c.reason}")
        if not c.ok:
            raise Unavailable(f"{n} is {c.status} on this host: {c.reason}")


def host_kind() -> str:
    return os.environ.get(HOST_KIND_ENV, DEFAULT_HOST_KIND)


def host_kind_file(kind: str | None = None) -> Path:
    return HOST_KINDS_DIR / f"{kind or host_kind()}.toml"


def expected(kind: str | None = None) -> frozenset[str]:
    """The capabilities every host of this kind has (`harness/host_kinds/<kind>.toml`)."""
    path = host_kind_file(kind)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        known = sorted(p.stem for p in HOST_KINDS_DIR.glob("*.toml"))
        raise UserError(f"{HOST_KIND_ENV}={kind or host_kind()!r}: no {path.name} (host kinds: {', '.join(known)})")
    return frozenset(doc["required"])


def in_ci() -> bool:
    """CI=true (GitHub Actions, GitLab and most CI systems set it): absences of expected capabilities fail."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def gate(*names: str) -> tuple[Action, str]:
    """What a test or stage needing `names` does here: run, skip (with the doctor's reason) or fail.

    fail: a capability is in error (a kvds bug), or CI=true and the host kind's list says it must be here."""
    must = expected() if in_ci() else frozenset()
    skip = ""
    for n in names:
        c = capability(n)
        if c.is_error:
            return "fail", f"kvds doctor: {n} error: {c.reason}\n{c.traceback}"
        if c.ok:
            continue
        if n in must:
            return "fail", (f"kvds doctor: {n} {c.status}: {c.reason} -- but CI=true and {host_kind_file().name} "
                            f"says this kind of host has {n}")
        skip = skip or f"kvds doctor: {n} {c.status}: {c.reason}"
    return ("skip", skip) if skip else ("run", "capabilities available")


MARK = "kvds_needs"


def skip_unless(*names: str):
    """A pytest mark gating a test on capabilities; tests/conftest.py's pytest_runtest_setup applies `gate`.

    Names are checked now, at collection: an unknown name is a collection error, never a skip."""
    import pytest  # lazily: the doctor runs without pytest

    for n in names:
        capability(n)
    return getattr(pytest.mark, MARK)(*names)


def apply_gate(item) -> None:
    """pytest_runtest_setup body: skip or fail a test per `gate` for every kvds_needs mark on it."""
    import pytest

    for mark in item.iter_markers(MARK):
        action, reason = gate(*mark.args)
        if action == "fail":
            pytest.fail(reason, pytrace=False)
        if action == "skip":  # reported at the test's location, as a skip mark would be
            raise pytest.skip.Exception(reason, _use_item_location=True)


def is_root() -> bool:
    return os.geteuid() == 0
