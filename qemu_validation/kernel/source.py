"""Kernel sources as pristine git commits in the cache, so builds can check out, patch and key on content.

`--source` is `debian-6.12` (Debian's /usr/src/linux-source-6.12.tar.xz), a tarball path, or a directory. A clean
git checkout is used as it is (its HEAD tree is the identity); a tarball or plain tree is imported once into a
cache repository, and its git tree hash becomes the identity, so the same content always maps to the same key.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError
from qemu_validation.kernel import cachedirs

DEBIAN_SOURCES = {"debian-6.12": Path("/usr/src/linux-source-6.12.tar.xz"),
                  "debian-6.1": Path("/usr/src/linux-source-6.1.tar.xz")}
# gc.auto=0: importing 90k files as loose objects would otherwise start a minute-long `git gc` on a CPU the
# kernel build needs; the clones read loose objects just as well.
GIT_IDENTITY = ["-c", "user.name=kvds", "-c", "user.email=kvds@localhost", "-c", "commit.gpgsign=false",
                "-c", "gc.auto=0"]


@dataclass(frozen=True)
class Source:
    name: str      # what the user asked for, for labels
    repo: Path     # a git repository holding `commit`
    commit: str
    tree: str      # content identity: the commit's tree hash


def git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    """Run git quietly; its stderr becomes the error message."""
    p = subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])} failed: {p.stderr.strip()[-300:]}")
    return p.stdout.strip()


def resolve(spec: str) -> Source:
    """The pristine source named by `spec`, importing it into the cache the first time."""
    if spec in DEBIAN_SOURCES:
        tarball = DEBIAN_SOURCES[spec]
        if not tarball.exists():
            raise UserError(f"--source {spec}: {tarball} is missing (apt-get install linux-source-{spec[7:]})")
        return _from_tarball(tarball, spec)
    path = Path(spec).expanduser()
    if path.is_file() and (path.name.endswith((".tar", ".tar.xz", ".tar.gz", ".tgz", ".tar.bz2"))):
        return _from_tarball(path.resolve(), path.name)
    if path.is_dir():
        if not (path / "Makefile").exists() or not (path / "mm").is_dir():
            raise UserError(f"--source {spec}: not a Linux source tree (no Makefile and mm/)")
        if (path / ".git").exists():
            return _from_git(path.resolve())
        return _import_tree(path.resolve(), path.name)
    raise UserError(f"--source {spec!r}: expected debian-6.12, a kernel tarball or a source directory")


def _from_git(path: Path) -> Source:
    if git("status", "--porcelain", "--untracked-files=no", cwd=path):
        raise UserError(f"--source {path}: the git tree has uncommitted changes; commit them so builds are keyed")
    commit = git("rev-parse", "HEAD", cwd=path)
    return Source(path.name, path, commit, git("rev-parse", "HEAD^{tree}", cwd=path))


def _from_tarball(tarball: Path, name: str) -> Source:
    st = tarball.stat()
    slug = hashlib.sha256(f"{tarball}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    dest = cachedirs.sources() / f"{_safe(name)}-{slug}"
    with _lock(dest):
        if not (dest / ".git").exists():
            tmp = Path(tempfile.mkdtemp(dir=cachedirs.sources(), prefix=".extract-"))
            try:
                # tar(1) rather than tarfile: several times faster on a 145 MB .xz with 90k files.
                p = subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp), "--no-same-owner"],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    raise UserError(f"cannot extract {tarball}: {p.stderr.strip()[-200:]}")
                top = _single_top(tmp)
                _git_import(top)
                top.rename(dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return _pristine(dest, name)


def _import_tree(path: Path, name: str) -> Source:
    slug = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    dest = cachedirs.sources() / f"{_safe(name)}-{slug}"
    with _lock(dest):
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(path, dest, symlinks=True)
        _git_import(dest)
    return _pristine(dest, name)


def _git_import(tree: Path) -> None:
    """Commit every file (forcing past Debian's top-level `/*` .gitignore) as one pristine commit."""
    git("init", "-q", cwd=tree)
    git("add", "-f", ".", cwd=tree)
    git("commit", "-q", "-m", "pristine kernel source imported by kvds", cwd=tree)


def _pristine(repo: Path, name: str) -> Source:
    commit = git("rev-list", "--max-parents=0", "-n1", "HEAD", cwd=repo)
    return Source(name, repo, commit, git("rev-parse", f"{commit}^{{tree}}", cwd=repo))


def _single_top(tmp: Path) -> Path:
    entries = list(tmp.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise UserError("the kernel tarball must contain one top-level directory")
    return entries[0]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in name)


class _lock:
    """An exclusive lock file next to `path`, so two kvds processes never import or build the same thing at once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path.with_name(path.name + ".lock")

    def __enter__(self) -> "_lock":
        self._fh = open(self._path, "w")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


lock = _lock
