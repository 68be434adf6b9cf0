"""Every README names only what exists: each backticked path (a/b.py, folder/, a glob, {x,y} alternatives), each
first-party module (`harness.stats`), each `kvds <verb> [--option]` command line (walked through the real parser,
every track loaded); and no README cites an issue number or a path outside the repository (../)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

import pytest

from harness import cli, doctor
from harness.paths import repo_root

ROOT = repo_root()
PACKAGES = ("harness", "io_priority", "kernel_vm", "ebpf", "qemu_validation", "kv_policy", "net_priority",
            "kernel_patches", "tests")
SOURCE_SUFFIXES = (".py", ".c")  # a bare file name with these is one of the repository's sources
SKIP_DIRS = {".venv", ".git", ".pytest_cache", "build", "results", "node_modules"}
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
TICKS = re.compile(r"`([^`\n]+)`")
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.I)
OUTSIDE = re.compile(r"(?<![\w.])\.\./")
PLACEHOLDER = re.compile(r"[<>$=@~]|://|\.\.\.")


def readmes() -> list[Path]:
    return sorted(p for p in ROOT.rglob("README*.md") if not SKIP_DIRS & set(p.relative_to(ROOT).parts[:-1]))


def alternatives(token: str) -> list[str]:
    """`a/{b,c}.py` -> a/b.py, a/c.py (one level of braces, as a shell would)."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [token[:m.start()] + alt + token[m.end():] for alt in m.group(1).split(",")]


def is_repo_path(token: str, readme: Path) -> bool:
    """A path into this repository: its first part is an entry of the top or of the README's folder, or it is a
    bare source file name. (`queue/scheduler`, `mm/vmscan.c`, `samples/x.npy` in a run directory are not.)"""
    if token.startswith(("/", "../")) or PLACEHOLDER.search(token) or '"' in token:
        return False
    if "/" not in token:
        return token.endswith(SOURCE_SUFFIXES)
    first = token.split("/")[0]
    return bool(first) and any((b / first).exists() for b in (readme.parent, ROOT))


def path_problem(token: str, readme: Path) -> str | None:
    for alt in alternatives(token):
        bases = (readme.parent, ROOT)
        if any(ch in alt for ch in "*?["):
            if not any(list(b.glob(alt.rstrip("/"))) for b in bases):
                return f"`{token}`: no file matches {alt}"
        elif not any((b / alt).exists() and (not alt.endswith("/") or (b / alt).is_dir()) for b in bases):
            return f"`{token}`: {alt} does not exist"
    return None


def module_problem(token: str) -> str | None:
    """A dotted first-party name: the longest importable module prefix, then attributes on it."""
    parts = token.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except (ImportError, ValueError):
            continue
        obj = importlib.import_module(name)
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return f"`{token}`: {name} has no {'.'.join(parts[n:])}"
            obj = getattr(obj, attr)
        return None
    return f"`{token}`: no such module"


@lru_cache(maxsize=None)
def capability_names() -> frozenset[str]:
    """`kvds doctor`'s names (`ebpf.libbpf` is a capability, not a module)."""
    return frozenset(c.name for c in doctor.all_capabilities())


def subparsers(p: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)


def command_problem(line: str, parser: argparse.ArgumentParser) -> str | None:
    """`kvds io bench --ebpf`: each word a subcommand of the one before until a leaf, each --option the leaf's.
    "a/b" and "a|b" are alternatives; words after the leaf that are not options are its arguments."""
    words = [w.strip("[]()") for w in line.split()[1:]]
    leaves = [([], parser)]
    for w in words:
        if not w or PLACEHOLDER.search(w) or w == "--":
            break
        if w.startswith("-"):
            for opt in re.split(r"[/|]", w):
                opt = opt.split("=")[0].strip("[]")
                for path, p in leaves:
                    if opt.startswith("--") and opt not in p._option_string_actions:
                        return f"`{line}`: `kvds {' '.join(path)}` has no option {opt}"
            continue
        nxt = []
        for path, p in leaves:
            sub = subparsers(p)
            if sub is None:
                continue  # a leaf: this word is an argument
            for alt in re.split(r"[/|]", w):
                if alt not in sub.choices:
                    return f"`{line}`: `kvds {' '.join([*path, alt])}` is no command"
                nxt.append(([*path, alt], sub.choices[alt]))
        leaves = nxt or leaves
    return None


def problems(readme: Path, parser: argparse.ArgumentParser) -> list[str]:
    text = readme.read_text()
    out = [f"says {m.group(0)!r}: issue numbers of a tracker a clone does not have" for m in ISSUE.finditer(text)]
    out += [f"names a path outside the repository: ...{text[max(0, m.start() - 20):m.end() + 20]!r}"
            for m in OUTSIDE.finditer(text)]
    commands = [ln.strip() for block in FENCE.findall(text) for ln in block.splitlines()
                if ln.strip().startswith("kvds ")]
    for token in TICKS.findall(FENCE.sub("", text)):
        token = token.strip()
        if token.startswith("kvds "):
            commands.append(token)
        elif " " in token or token.startswith("-"):
            continue
        elif "/" in token or token.endswith(SOURCE_SUFFIXES):
            if is_repo_path(token, readme):
                out.append(path_problem(token, readme))
        elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", token) and token.split(".")[0] in PACKAGES:
            out.append(None if token in capability_names() else module_problem(token))
    out += [command_problem(c, parser) for c in commands]
    return [p for p in out if p]


def test_the_readmes_are_found() -> None:
    found = {str(p.relative_to(ROOT)) for p in readmes()}
    assert {"README.md", "harness/README.md", "io_priority/README.md"} <= found, found


@pytest.mark.parametrize("readme", readmes(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_readme_names_only_what_exists(readme: Path) -> None:
    got = problems(readme, cli.build_parser())
    assert not got, f"{readme.relative_to(ROOT)}: {len(got)} problem(s):\n" + "\n".join(got)


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    bad = tmp_path / "README.md"
    bad.write_text("See issue 17 and ../shared/x. Code: `harness/nope.py`, `harness/report/sections/{io,vm}.py`, "
                   "`harness.no_such_module`, `harness.stats.no_such_name`, `kvds io nope`, `kvds io bench --nope`, "
                   "`harness/missing_dir/`.\n\n```sh\nkvds frobnicate\n```\nFine: `harness/stats.py`, `harness/`, "
                   "`harness.stats`, `kvds io bench --ebpf`, `kvds results list|show`, `harness/mappings/*.toml`.\n")
    got = "\n".join(problems(bad, cli.build_parser()))
    for part in ("'issue 17'", "../shared", "harness/nope.py does not exist", "sections/io.py does not exist",
                 "harness has no no_such_module", "harness.stats has no no_such_name",
                 "`kvds io nope` is no command", "has no option --nope", "harness/missing_dir/ does not exist",
                 "`kvds frobnicate` is no command"):
        assert part in got, (part, got)
    assert len(got.splitlines()) == 10, got
