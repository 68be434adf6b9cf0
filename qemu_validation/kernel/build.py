"""`kvds qemu build`: a patched kernel from tinyconfig + fragments, cached by content so it is built once.

The cache key hashes the source's git tree, every patch file, every fragment, the options and the compiler
version; a finished build lives in <cache>/qemu/builds/<key>/ (the bzImage, the final .config, build.json and the
build log). The object tree it was compiled in is a *workspace*, one per (source, fragments, options): every
patch set with the same configuration is built in the same tree. A build computes its patched commit off to the
side (git apply into a scratch index) and then checks it out, so git rewrites only the files that differ from the
last build and make recompiles only what they reach: editing one patch costs one object and a relink, not a new
tree. Workspaces sit at the same depth under the cache root, so with CCACHE_BASEDIR a new workspace reuses ccache.

Configuration is `make tinyconfig`'s own recipe, `make allnoconfig` with KCONFIG_ALLCONFIG set to tinyconfig's
fragments, with kvds's fragments appended: an option our fragments do not name stays off rather than taking its
default, which keeps the debug kernel's cold build inside its 15-minute budget.
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
from qemu_validation.kernel import cachedirs, kconfig_fragments
from qemu_validation.kernel.source import GIT_IDENTITY, git, lock, resolve

RECIPE = 2  # bump when the build steps change, so old builds are not reused (2: allnoconfig + workspaces)
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
BASE_FRAGMENT = CONFIG_DIR / "base.config"
DEBUG_FRAGMENT = CONFIG_DIR / "debug.config"
NET_FRAGMENT = CONFIG_DIR / "net.config"
IO_FRAGMENT = CONFIG_DIR / "io.config"
"""The delivery track's guest lab: IPv4, netns + veth, HTB/TBF/netem/fq (`kvds qemu build --fragment` it, or let
`kvds net bench --target guest` name it: qemu_validation/guest_target.py)."""
CC = "ccache gcc"
DEFAULT_SOURCE = "debian-6.12"
DEFAULT_PATCHES = ("mm_intent",)
# What `make tinyconfig` merges (scripts/kconfig/Makefile), read from the source tree being built.
TINY_FRAGMENTS = ("kernel/configs/tiny-base.config", "kernel/configs/tiny.config", "arch/x86/configs/tiny.config")


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
    return {"recipe": RECIPE, "configure": "allnoconfig+tiny", "source": spec.source, "source_tree": src.tree,
            "patches": patches,
            "fragments": frags, "kasan": spec.kasan, "cc": CC, "compiler": _compiler_version(), "target": "bzImage"}


def key_of(description: dict) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]


def label_of(spec: BuildSpec) -> str:
    parts = [spec.source.rsplit("/", 1)[-1], *(Path(n).name for n in spec.patches or ("vanilla",))]
    if spec.kasan:
        parts.append("kasan")
    # kvds's own fragments by name (debian-6.12+mm_intent+net), anyone else's as "custom"
    parts += sorted({f.stem if f.resolve().parent == CONFIG_DIR.resolve() else "custom" for f in spec.fragments})
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


def _make(tree: Path, log: Path, *args: str, jobs: int = 1, env: dict[str, str] | None = None) -> None:
    with open(log, "a") as fh:
        fh.write(f"\n$ make {' '.join(args)}\n")
        fh.flush()
        p = subprocess.run(["make", f"-j{jobs}", f"CC={CC}", *args], cwd=tree, stdout=fh, stderr=subprocess.STDOUT,
                           env={**_env(), **(env or {})})
    if p.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"make {' '.join(args)} failed (full log: {log}):\n{tail}")


def workspace_key(description: dict) -> str:
    """The object tree a build compiles in: everything in the key except the patches themselves."""
    return key_of({k: v for k, v in description.items() if k != "patches"})


def ensure_built(spec: BuildSpec, jobs: int | None = None, say=lambda msg: None) -> KernelBuild:
    """The build for `spec`, building it first when the cache does not have it."""
    desc = describe(spec)
    key = key_of(desc)
    d = cachedirs.builds() / key
    if (kb := _load(d)) is not None:
        return kb
    ws = cachedirs.workspaces() / workspace_key(desc)
    with lock(ws):  # one build at a time per tree; the build we waited for may be ours
        if (kb := _load(d)) is not None:
            return kb
        return _build(spec, desc, key, d, ws, jobs or os.cpu_count() or 1, say)


def _patch_files(spec: BuildSpec) -> list[tuple[str, Path]]:
    return [(name, patch) for name in spec.patches for patch in sorted(series_dir(name).glob("*.patch"))]


def _subject(patch: Path) -> str:
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith("Subject:"):
            return line[8:].strip()
    return patch.name


def patched_commit(tree: Path, base: str, patches: list[tuple[str, Path]], source_name: str) -> str:
    """The commit `base` + `patches`, made in a scratch index without touching the work tree.

    `git apply` is what `git am` runs on each mail; doing it off to the side means the later checkout rewrites
    only files whose content differs from the last build, so make's timestamps stay meaningful.
    """
    index = tree / ".git" / "kvds-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}

    def run(*args: str) -> str:
        p = subprocess.run(["git", *GIT_IDENTITY, *args], cwd=tree, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-300:])
        return p.stdout.strip()

    index.unlink(missing_ok=True)
    run("read-tree", base)
    commit = base
    for name, patch in patches:
        try:
            run("apply", "--cached", str(patch))
        except RuntimeError as exc:
            raise UserError(f"patch {name}/{patch.name} does not apply to {source_name}: {exc}") from None
        commit = run("commit-tree", run("write-tree"), "-p", commit, "-m", _subject(patch))
    index.unlink(missing_ok=True)
    return commit


def _allconfig(tree: Path, frags: list[Path], out: Path) -> None:
    """tinyconfig's fragments then ours, concatenated: Kconfig lets a later line override an earlier one."""
    parts = [(tree / f).read_text() for f in TINY_FRAGMENTS if (tree / f).exists()]
    parts += [f"# --- {f}\n{f.read_text()}" for f in frags]
    out.write_text("\n".join(parts))


def _build(spec: BuildSpec, desc: dict, key: str, d: Path, ws: Path, jobs: int, say) -> KernelBuild:
    started = time.monotonic()
    phases: dict[str, float] = {}
    d.mkdir(parents=True, exist_ok=True)
    ws.mkdir(parents=True, exist_ok=True)
    tree, log = ws / "linux", d / "build.log"
    label = label_of(spec)
    src = resolve(spec.source)
    incremental = (ws / "tree.ok").exists()
    say(f"building kernel {label} ({key}) in {'its' if incremental else 'a new'} workspace {ws.name}; log: {log}")
    if not incremental:
        shutil.rmtree(tree, ignore_errors=True)
        git("clone", "-q", "--shared", "--no-checkout", str(src.repo), str(tree))
        (ws / "tree.ok").write_text("")
    else:
        _reach(tree, src)
    commit = patched_commit(tree, src.commit, _patch_files(spec), spec.source)
    git("checkout", "-q", "-f", "--detach", commit, cwd=tree)
    phases["tree"] = time.monotonic() - started

    t = time.monotonic()
    frags = _fragments(spec)
    _allconfig(tree, frags, ws / "allconfig")
    _make(tree, log, "allnoconfig", jobs=1, env={"KCONFIG_ALLCONFIG": str(ws / "allconfig")})
    wanted: dict[str, str] = {}
    for f in frags:
        wanted.update(kconfig_fragments.load(f))
    lost, absent = [], []
    if missing := kconfig_fragments.missing(wanted, (tree / ".config").read_text()):
        lost, absent = kconfig_fragments.split_missing(missing, tree)
    if lost:
        raise UserError(f"Kconfig dropped requested options (unmet dependencies?): {', '.join(lost)}")
    if absent:
        say(f"options this source does not have (left out): {', '.join(absent)}")
    phases["configure"] = time.monotonic() - t

    t = time.monotonic()
    _make(tree, log, "bzImage", jobs=jobs)
    phases["compile"] = time.monotonic() - t
    shutil.copy2(tree / "arch/x86/boot/bzImage", d / "bzImage")
    shutil.copy2(tree / ".config", d / "config")
    release = (tree / "include/config/kernel.release").read_text().strip()
    info = {"id": key, "label": label, "built_at": time.time(), "build_seconds": round(time.monotonic() - started, 1),
            "phases": {k: round(v, 1) for k, v in phases.items()}, "incremental": incremental,
            "workspace": ws.name, "commit": commit, "kernel_release": release, "jobs": jobs,
            "options_not_in_source": absent, **desc}
    atomic.write_json(d / "build.json", info)
    timing = ", ".join(f"{k} {v:.0f} s" for k, v in phases.items())
    how = "incremental" if incremental else "new tree"
    say(f"built {label} ({key}) in {info['build_seconds']:.0f} s ({how}: {timing})")
    return KernelBuild(key, label, d, info)


def _reach(tree: Path, src) -> None:
    """Let a workspace see the source's pristine commit. A tarball re-imported (its mtime changed, so a new import
    directory) has the same git tree under a new commit; the workspace, keyed by that tree, still borrows the old
    import's objects and would fail with "failed to unpack tree object". Borrow the new import's as well."""
    if subprocess.run(["git", "cat-file", "-e", f"{src.commit}^{{commit}}"], cwd=tree,
                      capture_output=True).returncode == 0:
        return
    alternates = tree / ".git" / "objects" / "info" / "alternates"
    known = alternates.read_text().split() if alternates.exists() else []
    objects = str(Path(src.repo) / ".git" / "objects")
    if objects not in known:
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text("".join(f"{line}\n" for line in [*known, objects]))


def _du(path: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def prune(dry_run: bool = False) -> dict:
    """Free the disk that old builds hold: builds of an older recipe (each kept a multi-GB tree) and workspaces
    no remaining build came from. Finished builds of the current recipe (a bzImage each) stay."""
    removed: list[dict] = []
    keep_ws: set[str] = set()
    root = cachedirs.builds()
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if not d.is_dir():
            continue
        kb = _load(d)
        if kb is not None and kb.info.get("recipe") == RECIPE:
            keep_ws.add(kb.info.get("workspace", ""))
            continue
        if kb is None and (d / "build.log").exists() and not (d / "linux").exists():
            continue  # an unfinished build of this recipe, perhaps in progress: leave it
        removed.append({"path": str(d), "what": f"build {kb.label if kb else d.name} (recipe "
                        f"{kb.info.get('recipe') if kb else '?'})", "bytes": _du(d)})
    wroot = cachedirs.workspaces()
    for w in sorted(wroot.iterdir()) if wroot.is_dir() else []:
        if w.is_dir() and w.name not in keep_ws:
            removed.append({"path": str(w), "what": f"workspace {w.name} (no build uses it)", "bytes": _du(w)})
    if not dry_run:
        for r in list(removed):
            path = Path(r["path"])
            with lock(path):  # waits for a build in progress in that tree
                if path.parent == wroot and path.name in _workspaces_in_use():
                    removed.remove(r)  # a build finished in it meanwhile
                    continue
                shutil.rmtree(path, ignore_errors=True)
    return {"removed": removed, "freed_bytes": sum(r["bytes"] for r in removed), "dry_run": dry_run}


def _workspaces_in_use() -> set[str]:
    return {b.info.get("workspace", "") for b in all_builds() if b.info.get("recipe") == RECIPE}
