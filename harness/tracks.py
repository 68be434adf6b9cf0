"""What the tracks plug into the core, found through entry points, so that the core imports no track.

pyproject.toml declares them (one package installs every track; `make setup` reinstalls it when pyproject.toml
changes, which is when entry points change; a checkout whose installed entry points differ from its pyproject.toml
is refused with that advice, never run with a track silently missing):

    kvds.commands         NAME = module          a module with register(subparsers): the `kvds NAME` command
    kvds.probes           AREA[.PART] = module:fn fn() -> list[Capability]: `kvds doctor` rows of that area
    kvds.report_sections  NN-NAME = module:fn    fn(ReportContext), in the order of the names
    kvds.guest_lab        NAME = module          the QEMU guest behind `--target guest` (harness/remote/guest.py)
    kvds.summaries        TRACK.VERB = module:Cls a typed summary dataclass, documented in docs/results.md

kv_policy is a track living under harness/ (its commands, its report section); it registers like the others.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from harness.paths import repo_root

DIST = "kvds"


class NotInstalled(RuntimeError):
    """kvds's entry points are missing: the package was installed from an older pyproject.toml (a kvds error:
    `make setup` reinstalls it), never a host without a track."""


def declared(group: str) -> set[str] | None:
    """The entry point names this checkout's pyproject.toml declares (None when kvds runs from a wheel)."""
    path = repo_root() / "pyproject.toml"
    if not path.is_file():
        return None
    return set(tomllib.loads(path.read_text())["project"]["entry-points"].get(group, {}))


@lru_cache(maxsize=None)
def registered(group: str) -> tuple[EntryPoint, ...]:
    """kvds's entry points of one group (one distribution: the first found on sys.path)."""
    eps = tuple(ep for ep in entry_points(group=group) if ep.dist is None or ep.dist.name == DIST)
    want = declared(group)
    if not eps or (want is not None and want != {ep.name for ep in eps}):
        have = ", ".join(sorted(ep.name for ep in eps)) or "none"
        raise NotInstalled(f"the installed {group!r} entry points ({have}) are not the ones pyproject.toml declares "
                           f"({', '.join(sorted(want or ()))}): kvds is installed from an older pyproject.toml; run "
                           "'make setup' (it reinstalls the package)")
    return eps


def commands() -> tuple[EntryPoint, ...]:
    return registered("kvds.commands")


def probe_areas() -> dict[str, list[EntryPoint]]:
    """Track probes by doctor area ("io.ioload" adds to area "io")."""
    out: dict[str, list[EntryPoint]] = {}
    for ep in registered("kvds.probes"):
        out.setdefault(ep.name.split(".")[0], []).append(ep)
    return out


def report_sections() -> list[EntryPoint]:
    """In the order of their names (installers do not keep declaration order)."""
    return sorted(registered("kvds.report_sections"), key=lambda ep: ep.name)


def guest_lab() -> Any:
    """The guest lab's module (qemu_validation/guest_target.py): an import error in it is kvds's error and
    propagates."""
    (ep,) = registered("kvds.guest_lab")
    return ep.load()
