"""`kvds qemu build-prune` (also `kvds qemu build --prune`): free the disk old builds hold (kernel.build.prune:
builds of an older recipe, workspaces no build uses); with --dry-run only say what would go. Files nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.results import Filed, StoredSummary
from qemu_validation.kernel import build


@dataclass(frozen=True)
class BuildPruneConfig:
    dry_run: bool = False          # say what would go, delete nothing


@dataclass(frozen=True)
class BuildPruneSummary(StoredSummary):
    """What `kvds qemu build-prune` removed (or, with --dry-run, would remove)."""
    removed: list[dict[str, Any]]  # what, path, bytes
    freed_bytes: int               # bytes removed (or that would be)
    dry_run: bool                  # nothing was deleted


def run(cfg: BuildPruneConfig) -> Filed[BuildPruneSummary]:
    return Filed(None, BuildPruneSummary(**build.prune(dry_run=cfg.dry_run)))
