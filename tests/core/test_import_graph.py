"""The dependencies point one way: the core (harness/) imports no track, and no first-party module imports
itself back through others. Read statically from the source (every import statement, including the ones inside
functions), so a cycle hidden in a lazy import counts too.

Tracks: io_priority, kernel_vm, ebpf, qemu_validation, kv_policy, net_priority and e2e, each a top-level folder; the
core reaches all of them through the entry points in pyproject.toml (harness/tracks.py), by name, never by import.

A cycle is one among modules (a package's __init__ is a module); a module importing a submodule of its own
package through the package's __init__ is not counted as importing the package itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

TRACK_PACKAGES = ("io_priority", "kernel_vm", "ebpf", "qemu_validation", "kv_policy", "net_priority", "e2e")
PACKAGES = ("harness",) + TRACK_PACKAGES


def module_files(root: Path = REPO) -> dict[str, Path]:
    """Every first-party module by dotted name."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The first-party modules `name` imports: for `from a.b import c`, a.b.c when that is a module, else a.b."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:  # `import a.b.c` of a non-module attribute: the module that defines it
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph(root: Path = REPO) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def is_track(module: str) -> bool:
    return module.split(".")[0] in TRACK_PACKAGES


def core_imports_of_tracks(g: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, ts in g.items() if m.split(".")[0] == "harness" and not is_track(m)
                  for t in ts if is_track(t))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_core_imports_no_track() -> None:
    assert core_imports_of_tracks(graph()) == []


def test_the_first_party_import_graph_has_no_cycles() -> None:
    assert cycles(graph()) == []


def test_the_checks_see_an_import_inside_a_function(tmp_path: Path) -> None:
    """The analysis itself: a lazy import of a track from the core, and a lazy import back, are both found."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "harness" / "a.py").write_text("def f():\n    from harness import b\n    from ebpf.x import y\n")
    (tmp_path / "harness" / "b.py").write_text("from . import a\n")
    (tmp_path / "ebpf" / "x.py").write_text("y = 1\n")
    g = graph(tmp_path)
    assert core_imports_of_tracks(g) == ["harness.a -> ebpf.x"]
    assert cycles(g) == [["harness.a", "harness.b"]]
