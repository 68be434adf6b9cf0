"""What kvds ships to a host: a wheel built from this checkout, and the wheels of its dependencies.

The wheel is built from a copy of the checkout's package directories (so the shared working tree gets no
build/ or egg-info litter) and cached by a hash of their contents: an unchanged tree is not rebuilt. The
dependency wheels are downloaded here once per host platform and cached, so hosts need no internet access.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.errors import Unavailable
from harness.paths import cache_dir, repo_root

SKIP_DIRS = {"__pycache__", ".pytest_cache", "build", "dist"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".so", ".o", ".egg-info")


class WheelBuildFailed(RuntimeError):
    """`pip wheel` refused this checkout: kvds itself is broken here (exit 1), which no target can be blamed for."""


@dataclass(frozen=True)
class Payload:
    wheel: Path
    source_hash: str
    dependencies: tuple[str, ...]


def _pyproject(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())


def dependencies(root: Path | None = None) -> tuple[str, ...]:
    return tuple(_pyproject(root or repo_root())["project"]["dependencies"])


def _package_dirs(root: Path) -> list[Path]:
    pats = _pyproject(root).get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {}).get("include", [])
    tops = {p.rstrip("*").rstrip(".") for p in pats} or {"harness"}
    return sorted(root / t for t in tops if (root / t / "__init__.py").is_file())


def source_files(root: Path | None = None) -> list[Path]:
    """The files a wheel is built from: pyproject, README and the packages' trees."""
    root = root or repo_root()
    files = [root / "pyproject.toml"] + ([root / "README.md"] if (root / "README.md").is_file() else [])
    for d in _package_dirs(root):
        for p in sorted(d.rglob("*")):
            rel = p.relative_to(root).parts
            if p.is_file() and not SKIP_DIRS.intersection(rel) and not p.name.endswith(SKIP_SUFFIXES):
                files.append(p)
    return files


def source_hash(root: Path | None = None) -> str:
    root = root or repo_root()
    h = hashlib.sha256()
    for p in source_files(root):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_wheel(root: Path | None = None) -> Payload:
    """The kvds wheel for this checkout (built once per distinct source tree)."""
    root = root or repo_root()
    digest = source_hash(root)
    out = cache_dir() / "remote" / "wheels" / digest
    found = sorted(out.glob("kvds-*.whl"))
    if not found:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            stage = Path(tmp) / "src"
            for p in source_files(root):
                dest = stage / p.relative_to(root)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dest)
            res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(Path(tmp) / "w"),
                                  str(stage)], capture_output=True, text=True)
            if res.returncode != 0:  # kvds's own sources failed to build here: a kvds error, not a host's absence
                raise WheelBuildFailed(f"building the kvds wheel from {root} failed: {_pip_error(res.stderr)}")
            built = sorted((Path(tmp) / "w").glob("kvds-*.whl"))
            out.mkdir(exist_ok=True)
            for w in built:
                shutil.move(str(w), out / w.name)
        found = sorted(out.glob("kvds-*.whl"))
    return Payload(wheel=found[0], source_hash=digest, dependencies=dependencies(root))


def _pip_error(stderr: str, limit: int = 300) -> str:
    """pip's complaint on one line: its error lines and their explanation, without the note/hint boilerplate."""
    lines = [ln.strip(" ×╰─>│") for ln in stderr.splitlines()]
    keep = [ln for ln in lines if ln and not ln.lower().startswith(("note:", "hint:"))]
    text = "; ".join(keep) or "no output"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def wheelhouse(deps: tuple[str, ...], platform_key: str, pip_platform_args: tuple[str, ...] = ()) -> list[Path]:
    """Dependency wheels for one host platform, downloaded here (cached) so the host needs no index."""
    key = hashlib.sha256(("\n".join(deps) + "\n" + platform_key).encode()).hexdigest()[:16]
    d = cache_dir() / "remote" / "wheelhouse" / key
    done = d / ".complete"
    if not done.exists():
        d.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(d), *pip_platform_args,
               *deps]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            errs = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")] or res.stderr.strip().splitlines()
            raise Unavailable(f"downloading dependency wheels for {platform_key} failed: "
                              f"{(errs or ['no output'])[-1]} (or use --deps index if the hosts can reach an index)")
        done.write_text(platform_key + "\n")
    return sorted(d.glob("*.whl"))
