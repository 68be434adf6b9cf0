"""`kvds qemu build`: a patched kernel from tinyconfig + fragments, cached by content so it is built once.

The cache key hashes the source's git tree, every patch file, every fragment, the options and the compiler
version; a build lives in <cache>/qemu/builds/<key>/ (an in-tree build in linux/, the bzImage, the final .config
and build.json). In-tree builds at the same depth for every key give identical compiler command lines, so with
CCACHE_BASEDIR a new key (say, one more patch) recompiles only what the patch touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import atomic
from harness.errors import UserError
from harness.paths import repo_root
from qemu_validation import cachedirs, kconfig_fragments
from qemu_validation.source import git, lock, resolve

RECIPE = 1  # bump when the build steps change, so old builds are not reused
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
BASE_FRAGMENT = CONFIG_DIR / "base.config"
DEBUG_FRAGMENT = CONFIG_DIR / "debug.config"
CC = "ccache gcc"
DEFAULT_SOURCE = "debian-6.12"
DEFAULT_PATCHES = ("mm_intent",)


class BuildError(Exception):
    """make or git failed on a well-formed request; carries the log tail."""


def patch_root() -> Path:
    return repo_root() / "kernel_patches"


@dataclass(frozen=True)
class BuildSpec:
    source: str = DEFAULT_SOURCE
    patches: tuple[str, ...] = DEFAULT_PATCHES
    kasan: bool = False
    fragments: tuple[Path, ...] = ()


@dataclass
class KernelBuild:
    id: str
    label: str
    dir: Path
    info: dict = field(default_factory=dict)

    @property
    def bzimage(self) -> Path:
        return self.dir / "bzImage"

    @property
    def config(self) -> Path:
        return self.dir / "config"

    @property
    def kasan(self) -> bool:
        return bool(self.info.get("kasan"))


def series_dir(name: str) -> Path:
    """A patch series by name (a directory under kernel_patches/) or by path."""
    p = Path(name)
    d = p if p.is_dir() else patch_root() / name
    if not d.is_dir() or not sorted(d.glob("*.patch")):
        known = ", ".join(sorted(x.name for x in patch_root().iterdir() if x.is_dir())) if patch_root().is_dir() else ""
        raise UserError(f"--patches {name!r}: no such patch series (known: {known or 'none'})")
    return d


def parse_patches(text: str) -> tuple[str, ...]:
    """`none`, or series names applied in order: `mm_intent` or `mm_intent,broken-uaf`."""
    if text.strip() == "none":
        return ()
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise UserError(f"--patches {text!r}: empty series name")
    return names


def _fragments(spec: BuildSpec) -> list[Path]:
    frags = [BASE_FRAGMENT] + ([DEBUG_FRAGMENT] if spec.kasan else [])
    for name in spec.patches:
        cfg = series_dir(name) / "config"
        if cfg.exists():
            frags.append(cfg)
    for f in spec.fragments:
        if not f.is_file():
            raise UserError(f"--fragment {f}: no such file")
        frags.append(f.resolve())
    return frags


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _compiler_version() -> str:
    try:
        return subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        raise UserError("gcc is not installed (harness/setup installs build-essential)") from None


def describe(spec: BuildSpec) -> dict:
    """Everything the kernel binary depends on; its hash is the build key."""
    src = resolve(spec.source)
    patches = [{"series": n, "file": p.name, "sha256": _sha(p)}
               for n in spec.patches for p in sorted(series_dir(n).glob("*.patch"))]
    frags = [{"file": f.name, "sha256": _sha(f)} for f in _fragments(spec)]
    return {"recipe": RECIPE, "source": spec.source, "source_tree": src.tree, "patches": patches,
            "fragments": frags, "kasan": spec.kasan, "cc": CC, "compiler": _compiler_version(), "target": "bzImage"}


def key_of(description: dict) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]


def label_of(spec: BuildSpec) -> str:
    parts = [spec.source.rsplit("/", 1)[-1], *(spec.patches or ("vanilla",))]
    if spec.kasan:
        parts.append("kasan")
    if spec.fragments:
        parts.append("custom")
    return "+".join(parts)


def cached(spec: BuildSpec) -> KernelBuild | None:
    """The finished build for `spec`, or None; never builds."""
    key = key_of(describe(spec))
    return _load(cachedirs.builds() / key)


def _load(d: Path) -> KernelBuild | None:
    info_path = d / "build.json"
    if not info_path.exists():
        return None
    info = json.loads(info_path.read_text())
    kb = KernelBuild(info["id"], info["label"], d, info)
    return kb if kb.bzimage.exists() else None


def all_builds() -> list[KernelBuild]:
    root = cachedirs.builds()
    found = [_load(d) for d in sorted(root.iterdir())] if root.is_dir() else []
    return [b for b in found if b is not None]


def find(kernel_id: str) -> KernelBuild:
    """A finished build by id, unique id prefix, or label (the newest build with that label)."""
    builds = all_builds()
    exact = [b for b in builds if b.id == kernel_id]
    prefix = [b for b in builds if b.id.startswith(kernel_id)]
    labelled = sorted((b for b in builds if b.label == kernel_id), key=lambda b: b.info.get("built_at", 0))
    if exact:
        return exact[0]
    if len(prefix) == 1:
        return prefix[0]
    if labelled:
        return labelled[-1]
    if len(prefix) > 1:
        raise UserError(f"--kernel {kernel_id!r} is ambiguous ({len(prefix)} builds match)")
    raise UserError(f"--kernel {kernel_id!r}: no such build (see `kvds qemu build --list`)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env.update(CCACHE_DIR=str(cachedirs.ccache()), CCACHE_BASEDIR=str(cachedirs.root()), CCACHE_NOHASHDIR="1",
               CCACHE_MAXSIZE="6G", KBUILD_BUILD_USER="kvds", KBUILD_BUILD_HOST="kvds", LC_ALL="C")
    return env


def _make(tree: Path, log: Path, *args: str, jobs: int = 1) -> None:
    with open(log, "a") as fh:
        fh.write(f"\n$ make {' '.join(args)}\n")
        fh.flush()
        p = subprocess.run(["make", f"-j{jobs}", f"CC={CC}", *args], cwd=tree, stdout=fh, stderr=subprocess.STDOUT,
                           env=_env())
    if p.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"make {' '.join(args)} failed (full log: {log}):\n{tail}")


def ensure_built(spec: BuildSpec, jobs: int | None = None, say=lambda msg: None) -> KernelBuild:
    """The build for `spec`, building it first when the cache does not have it."""
    desc = describe(spec)
    key = key_of(desc)
    d = cachedirs.builds() / key
    if (kb := _load(d)) is not None:
        return kb
    with lock(d):
        if (kb := _load(d)) is not None:
            return kb
        return _build(spec, desc, key, d, jobs or os.cpu_count() or 1, say)


def _build(spec: BuildSpec, desc: dict, key: str, d: Path, jobs: int, say) -> KernelBuild:
    started = time.monotonic()
    d.mkdir(parents=True, exist_ok=True)
    tree, log = d / "linux", d / "build.log"
    label = label_of(spec)
    say(f"building kernel {label} ({key}); log: {log}")
    if not (d / "tree.ok").exists():
        shutil.rmtree(tree, ignore_errors=True)
        src = resolve(spec.source)
        git("clone", "-q", "--shared", "--no-checkout", str(src.repo), str(tree))
        git("checkout", "-q", "--detach", src.commit, cwd=tree)
        for name in spec.patches:
            for patch in sorted(series_dir(name).glob("*.patch")):
                try:
                    git("am", "-q", "--committer-date-is-author-date", str(patch), cwd=tree)
                except RuntimeError as exc:
                    git("am", "--abort", cwd=tree, check=False)
                    raise UserError(f"patch {name}/{patch.name} does not apply to {spec.source}: {exc}") from None
        (d / "tree.ok").write_text("")
    _make(tree, log, "tinyconfig", jobs=1)
    frags = _fragments(spec)
    merge = subprocess.run(["scripts/kconfig/merge_config.sh", "-m", ".config", *map(str, frags)], cwd=tree,
                           capture_output=True, text=True, env=_env())
    if merge.returncode != 0:
        raise BuildError(f"merge_config.sh failed: {merge.stderr.strip()[-300:]}")
    _make(tree, log, "olddefconfig", jobs=1)
    wanted: dict[str, str] = {}
    for f in frags:
        wanted.update(kconfig_fragments.load(f))
    lost = kconfig_fragments.missing(wanted, (tree / ".config").read_text())
    if lost:
        raise UserError(f"Kconfig dropped requested options (unmet dependencies?): {', '.join(lost)}")
    _make(tree, log, "bzImage", jobs=jobs)
    shutil.copy2(tree / "arch/x86/boot/bzImage", d / "bzImage")
    shutil.copy2(tree / ".config", d / "config")
    release = (tree / "include/config/kernel.release").read_text().strip()
    info = {"id": key, "label": label, "built_at": time.time(), "build_seconds": round(time.monotonic() - started, 1),
            "kernel_release": release, "jobs": jobs, **desc}
    atomic.write_json(d / "build.json", info)
    say(f"built {label} ({key}) in {info['build_seconds']:.0f} s")
    return KernelBuild(key, label, d, info)
