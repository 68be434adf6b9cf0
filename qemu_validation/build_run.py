"""`kvds qemu build`, shaped as the track template: cli.py parses arguments into one BuildConfig; `run` builds (or
reuses) the kernel it describes, lists the cache or prunes it, and returns a typed summary; render.py prints it,
harness/emit.py with --json."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal

from qemu_validation.kernel import build

Action = Literal["build", "list", "prune"]


@dataclass(frozen=True)
class BuildConfig:
    spec: build.BuildSpec = build.BuildSpec()
    action: Action = "build"     # build (or reuse) spec's kernel, list the cache, or prune it
    jobs: int | None = None      # make -j (None: all CPUs)
    dry_run: bool = False        # prune: say what would go, delete nothing


@dataclass(frozen=True)
class BuildSummary:
    """The kernel `kvds qemu build` built or found in the cache."""
    id: str                        # the build cache key (hash of what the kernel is built from)
    label: str                     # the spec in words (source, series, debug or base)
    cached: bool                   # it was in the cache before this command
    bzImage: str                   # path of the kernel image
    config: str                    # its .config
    build_seconds: float | None    # wall time of the build that made it
    phases: dict[str, float] | None  # seconds per build phase (tree, configure, compile)
    incremental: bool | None       # built in an existing tree of the same source (only changed files compiled)
    release: str | None            # uname -r of the kernel

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BuildListSummary:
    """Every kernel in the build cache (`kvds qemu build --list`)."""
    builds: list[dict[str, Any]]   # id, label, release, build_seconds, phases, incremental, bzImage

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PruneSummary:
    """What `kvds qemu build --prune` removed (or, with --dry-run, would remove)."""
    removed: list[dict[str, Any]]  # what, path, bytes
    freed_bytes: int               # bytes removed (or that would be)
    dry_run: bool                  # nothing was deleted

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run(cfg: BuildConfig, say: Callable[[str], None] = lambda msg: None) -> BuildSummary | BuildListSummary | PruneSummary:
    """Carry out cfg.action; a failed build raises build.BuildError."""
    if cfg.action == "prune":
        return PruneSummary(**build.prune(dry_run=cfg.dry_run))
    if cfg.action == "list":
        return BuildListSummary([{"id": b.id, "label": b.label, "release": b.info.get("kernel_release"),
                                  "build_seconds": b.info.get("build_seconds"), "phases": b.info.get("phases"),
                                  "incremental": b.info.get("incremental"), "bzImage": str(b.bzimage)}
                                 for b in build.all_builds()])
    was_cached = build.cached(cfg.spec) is not None
    kb = build.ensure_built(cfg.spec, jobs=cfg.jobs, say=say)
    return BuildSummary(id=kb.id, label=kb.label, cached=was_cached, bzImage=str(kb.bzimage), config=str(kb.config),
                        build_seconds=kb.info.get("build_seconds"), phases=kb.info.get("phases"),
                        incremental=kb.info.get("incremental"), release=kb.info.get("kernel_release"))
