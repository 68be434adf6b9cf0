"""`kvds qemu build-list` (also `kvds qemu build --list`): every kernel in the build cache, newest recipe or not;
reads the cache, changes nothing, files nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import Filed, StoredSummary
from qemu_validation.kernel import build


@dataclass(frozen=True)
class BuildListConfig:
    """build-list takes no options: the cache is harness.paths.cache_dir()'s."""


@dataclass(frozen=True)
class BuildListSummary(StoredSummary):
    """Every kernel in the build cache (`kvds qemu build-list`)."""
    builds: list[dict[str, Any]]   # id, label, release, build_seconds, phases, incremental, bzImage


def run(cfg: BuildListConfig) -> Filed[BuildListSummary]:
    return Filed(None, BuildListSummary([{"id": b.id, "label": b.label, "release": b.info.get("kernel_release"),
                                          "build_seconds": b.info.get("build_seconds"),
                                          "phases": b.info.get("phases"), "incremental": b.info.get("incremental"),
                                          "bzImage": str(b.bzimage)} for b in build.all_builds()]))
