"""Apply the patch series with `git am` to the files they touch, cut out of each kernel source kvds supports.

A full kernel tree takes a minute to extract and import; the files a series touches take seconds. The cut is
cached per tarball (by path, size and mtime) and per file list, so `make test` checks both sources cheaply:
the same `git am` a developer runs, on the same bytes, without building anything.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.paths import repo_root
from qemu_validation.kernel import cachedirs
from qemu_validation.kernel.source import GIT_IDENTITY, lock

# The sources the series must apply to: vanilla Linux 6.8 (the design's kernel) and Debian's 6.12 (what the
# guest lab builds by default).
SOURCES = {
    "linux-6.8": repo_root().parent / "shared" / "kernels" / "linux-6.8.tar.xz",
    "debian-6.12": Path("/usr/src/linux-source-6.12.tar.xz"),
}
# checkpatch.pl and the data files it reads, so the check uses the kernel's own script.
CHECKPATCH = ("scripts/checkpatch.pl", "scripts/spelling.txt", "scripts/const_structs.checkpatch")
_DIFF = re.compile(r"^diff --git a/(\S+) b/\S+\n(new file mode)?", re.M)


class SeriesError(Exception):
    """A series does not apply; carries git's message."""


def touched(patches: list[Path]) -> tuple[list[str], list[str]]:
    """(files the patches modify, files they create), in first-seen order."""
    modified: list[str] = []
    created: list[str] = []
    for p in patches:
        for m in _DIFF.finditer(p.read_text(errors="replace")):
            name = m.group(1)
            bucket = created if m.group(2) else modified
            if name not in modified and name not in created:
                bucket.append(name)
    return modified, created


def _git(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=tree, capture_output=True, text=True)


def cut(tarball: Path, files: list[str]) -> Path:
    """A git repository holding `files` of `tarball` as one commit (cached); `files` must exist in it."""
    st = tarball.stat()
    slug = hashlib.sha256(f"{tarball}:{st.st_size}:{st.st_mtime_ns}:{sorted(files)}".encode()).hexdigest()[:16]
    dest = cachedirs.root() / "series-check" / f"{tarball.name.split('.tar')[0]}-{slug}"
    with lock(dest):
        if not (dest / ".git").exists():
            tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".cut-"))
            try:
                p = subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp), "--no-same-owner", "--wildcards",
                                    "--no-wildcards-match-slash", *(f"*/{f}" for f in files)],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    raise SeriesError(f"cannot cut {len(files)} files out of {tarball}: {p.stderr.strip()[-300:]}")
                (top,) = list(tmp.iterdir())
                for args in (("init", "-q"), ("add", "-f", "."), ("commit", "-q", "-m", f"{tarball.name} (cut)")):
                    if (r := _git(top, *args)).returncode != 0:
                        raise SeriesError(f"git {args[0]} failed: {r.stderr.strip()[-300:]}")
                top.rename(dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return dest


def git_am(tarball: Path, patches: list[Path], scratch: Path) -> tuple[Path, list[str]]:
    """`git am` of `patches` onto the cut of `tarball` in a scratch clone; returns the clone and the subjects."""
    modified, _ = touched(patches)
    base = cut(tarball, sorted(set(modified) | set(CHECKPATCH)))
    tree = scratch / tarball.name.split(".tar")[0]
    if (r := subprocess.run(["git", "clone", "-q", str(base), str(tree)], capture_output=True, text=True)).returncode:
        raise SeriesError(f"git clone failed: {r.stderr.strip()[-300:]}")
    r = _git(tree, "am", "-q", *map(str, patches))
    if r.returncode != 0:
        raise SeriesError(f"git am onto {tarball.name} failed: {(r.stdout + r.stderr).strip()[-600:]}")
    n = len(patches)
    subjects = _git(tree, "log", f"-{n}", "--format=%s", "--reverse").stdout.splitlines()
    return tree, subjects


def checkpatch(tree: Path, patches: list[Path]) -> str:
    """checkpatch.pl --strict's terse report on `patches` (empty when clean), using the cut's own script."""
    p = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", "--terse", "--no-tree", "--no-summary",
                        *map(str, patches)], cwd=tree, capture_output=True, text=True)
    return p.stdout.strip()
