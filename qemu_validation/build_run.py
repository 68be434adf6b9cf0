"""`kvds qemu build`: build (or reuse) the kernel a BuildConfig describes; nothing is filed in the results store
(the build cache is where a kernel lives). cli.py builds the config, render.build prints the summary."""

from __future__ import annotations

from dataclasses import dataclass

from harness.progress import say
from harness.results import Filed, StoredSummary
from qemu_validation.kernel import build


@dataclass(frozen=True)
class BuildConfig:
    spec: build.BuildSpec = build.BuildSpec()
    jobs: int | None = None      # make -j (None: all CPUs)


@dataclass(frozen=True)
class BuildSummary(StoredSummary):
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


def run(cfg: BuildConfig) -> Filed[BuildSummary]:
    """The build for cfg.spec, built first when the cache does not hold it; a failed build raises BuildError."""
    was_cached = build.cached(cfg.spec) is not None
    kb = build.ensure_built(cfg.spec, jobs=cfg.jobs, say=say)
    return Filed(None, BuildSummary(id=kb.id, label=kb.label, cached=was_cached, bzImage=str(kb.bzimage),
                                    config=str(kb.config), build_seconds=kb.info.get("build_seconds"),
                                    phases=kb.info.get("phases"), incremental=kb.info.get("incremental"),
                                    release=kb.info.get("kernel_release")))
