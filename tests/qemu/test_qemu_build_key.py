"""Build keys and configuration checks, on a tiny stand-in source tree (no kernel is compiled here)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from harness.errors import UserError
from qemu_validation.kernel import build, kconfig_fragments, source


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    t = tmp_path / "linux"
    (t / "mm").mkdir(parents=True)
    (t / "Makefile").write_text("VERSION = 6\n")
    (t / "mm" / "a.c").write_text("int a;\n")
    return t


def _series(tmp_path: Path, name: str, body: str) -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "0001-x.patch").write_text(body)
    return d


def test_key_tracks_every_input(tree: Path, tmp_path: Path) -> None:
    s1 = _series(tmp_path, "s1", "patch one\n")
    frag = tmp_path / "extra.config"
    frag.write_text("CONFIG_X=y\n")
    base = build.BuildSpec(source=str(tree), patches=(str(s1),))
    k = build.key_of(build.describe(base))
    assert k == build.key_of(build.describe(base))                       # stable
    assert k != build.key_of(build.describe(build.BuildSpec(source=str(tree), patches=())))
    assert k != build.key_of(build.describe(build.BuildSpec(source=str(tree), patches=(str(s1),), kasan=True)))
    assert k != build.key_of(build.describe(build.BuildSpec(source=str(tree), patches=(str(s1),), fragments=(frag,))))
    (s1 / "0001-x.patch").write_text("patch one, edited\n")
    assert k != build.key_of(build.describe(base))


def test_plain_tree_identity_is_content(tree: Path, tmp_path: Path) -> None:
    t1 = source.resolve(str(tree)).tree
    (tree / "mm" / "a.c").write_text("int b;\n")
    assert source.resolve(str(tree)).tree != t1


def test_dirty_git_source_is_refused(tree: Path) -> None:
    source.git("init", "-q", cwd=tree)
    source.git("add", "-f", ".", cwd=tree)
    source.git("commit", "-q", "-m", "x", cwd=tree)
    assert source.resolve(str(tree)).tree
    (tree / "mm" / "a.c").write_text("changed\n")
    with pytest.raises(UserError, match="uncommitted"):
        source.resolve(str(tree))


def test_bad_specs(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError):
        source.resolve(str(tmp_path / "nope"))
    with pytest.raises(UserError, match="no such patch series"):
        build.describe(build.BuildSpec(source=str(tree), patches=("no-such-series",)))
    with pytest.raises(UserError):
        build.parse_patches("mm_intent,,x")
    assert build.parse_patches("none") == ()
    assert build.parse_patches("mm_intent,broken-uaf") == ("mm_intent", "broken-uaf")


def test_repo_series_are_complete() -> None:
    series = build.series_dir("mm_intent")
    patches = sorted(p.name for p in series.glob("*.patch"))
    assert [p[:5] for p in patches] == [f"{i:04d}-" for i in range(1, len(patches) + 1)] and len(patches) >= 4
    assert kconfig_fragments.load(series / "config") == {"CONFIG_MM_INTENT": "y", "CONFIG_KUNIT": "y",
                                                         "CONFIG_KUNIT_DEBUGFS": "y", "CONFIG_MM_INTENT_KUNIT_TEST": "y"}
    for variant in ("broken-uaf", "broken-lockdep", "broken-leak", "broken-lockkey"):
        assert build.series_dir(variant)


def test_fragment_parsing_and_lost_options() -> None:
    frag = kconfig_fragments.parse("# c\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x y\"\n")
    assert frag == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_S": '"x y"'}
    config = "CONFIG_A=y\nCONFIG_S=\"x y\"\n# CONFIG_C is not set\n"
    assert kconfig_fragments.missing(frag, config) == []
    assert kconfig_fragments.missing({"CONFIG_D": "y", "CONFIG_A": "m"}, config) == ["CONFIG_D=y", "CONFIG_A=m"]
    with pytest.raises(UserError, match="^f:2: "):
        kconfig_fragments.parse("CONFIG_A=y\nnonsense\n", "f")


def test_shipped_fragments_parse() -> None:
    base = kconfig_fragments.load(build.BASE_FRAGMENT)
    debug = kconfig_fragments.load(build.DEBUG_FRAGMENT)
    assert base["CONFIG_DEBUG_FS"] == "y" and base["CONFIG_64BIT"] == "y"
    assert debug["CONFIG_KASAN"] == "y" and debug["CONFIG_PROVE_LOCKING"] == "y" and debug["CONFIG_SLUB_TINY"] == "n"
    assert debug["CONFIG_DEBUG_KMEMLEAK"] == "y"


# `git am` onto both sources and checkpatch: tests/qemu/test_qemu_series.py (no cache needed, so no skip).


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    r = tmp_path / "repo"
    (r / "mm").mkdir(parents=True)
    (r / "mm" / "mm_intent.c").write_text("// SPDX-License-Identifier: GPL-2.0\n#include <x.h>\nint a;\nint b;\n")
    (r / "mm" / "other.c").write_text("int c;\n")
    source.git("init", "-q", cwd=r)
    source.git("add", ".", cwd=r)
    source.git("commit", "-q", "-m", "base", cwd=r)
    return r, source.git("rev-parse", "HEAD", cwd=r)


def test_patched_commit_touches_nothing_until_checkout(repo: tuple[Path, str], tmp_path: Path) -> None:
    """The build's patch step: commits made off to the side, then a checkout that rewrites only changed files,
    so make's timestamps say exactly what a patch changed."""
    from qemu_validation import rebuild_time_run
    r, base = repo
    target = r / "mm" / "mm_intent.c"
    original = target.read_text()
    series = tmp_path / "series"
    series.mkdir()
    (series / "0001-n.patch").write_text(rebuild_time_run.nonce_patch(original, "abc123"))
    before = {p: p.stat().st_mtime_ns for p in (target, r / "mm" / "other.c")}
    commit = build.patched_commit(r, base, [("s", series / "0001-n.patch")], "src")
    assert {p: p.stat().st_mtime_ns for p in before} == before and target.read_text() == original
    assert "kvds qemu rebuild-time: abc123" in source.git("show", f"{commit}:mm/mm_intent.c", cwd=r)
    assert source.git("log", "-1", "--format=%s", commit, cwd=r).startswith(
        "[PATCH] kvds rebuild-time: touch mm/mm_intent.c")
    time.sleep(0.01)
    source.git("checkout", "-q", "-f", "--detach", commit, cwd=r)
    assert (r / "mm" / "other.c").stat().st_mtime_ns == before[r / "mm" / "other.c"]
    assert target.stat().st_mtime_ns != before[target] and "abc123" in target.read_text()
    # the same patch again does not apply on top of itself, and the error names it
    with pytest.raises(UserError, match=r"patch s/0001-n.patch does not apply to src"):
        build.patched_commit(r, commit, [("s", series / "0001-n.patch")], "src")


def _fake_build(d: Path, recipe: int, workspace: str) -> None:
    d.mkdir(parents=True)
    (d / "bzImage").write_bytes(b"x" * 4096)
    (d / "build.json").write_text(json.dumps({"id": d.name, "label": "l", "recipe": recipe, "workspace": workspace}))


def test_prune_removes_old_builds_and_unused_trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qemu_validation.kernel import cachedirs
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "cache"))
    b, w = cachedirs.builds(), cachedirs.workspaces()
    _fake_build(b / "new", build.RECIPE, "w-used")
    _fake_build(b / "old", build.RECIPE - 1, "")
    (b / "old" / "linux" / "mm").mkdir(parents=True)          # the old layout kept its tree in the build
    (b / "old" / "linux" / "mm" / "x.o").write_bytes(b"y" * 8192)
    for name in ("w-used", "w-orphan"):
        (w / name / "linux").mkdir(parents=True)
        (w / name / "linux" / "vmlinux").write_bytes(b"z" * 8192)
    dry = build.prune(dry_run=True)
    assert sorted(Path(r["path"]).name for r in dry["removed"]) == ["old", "w-orphan"] and dry["freed_bytes"] > 0
    assert (b / "old").exists() and (w / "w-orphan").exists()
    done = build.prune()
    assert done["freed_bytes"] == dry["freed_bytes"]
    assert not (b / "old").exists() and not (w / "w-orphan").exists()
    assert (b / "new" / "bzImage").exists() and (w / "w-used" / "linux" / "vmlinux").exists()
    assert build.prune()["removed"] == []


def test_prune_cli_and_bad_flags(tmp_path: Path) -> None:
    import os
    import sys
    env = dict(os.environ, KVDS_CACHE_DIR=str(tmp_path / "cache"))
    kvds = [sys.executable, "-m", "harness.cli", "qemu", "build"]
    bad = subprocess.run([*kvds, "--dry-run"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["kvds: error: --dry-run goes with --prune"]
    ok = subprocess.run([*kvds, "--prune", "--dry-run", "--json"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout)["summary"] == {"removed": [], "freed_bytes": 0, "dry_run": True}


def test_options_a_source_lacks_are_left_out_not_refused(tree: Path) -> None:
    """One set of fragments serves 6.8 and 6.12: an option the source has no symbol for (SLUB_RCU_DEBUG before
    6.12) is left out and recorded; an option the source defines but Kconfig dropped is still refused."""
    (tree / "mm" / "Kconfig").write_text("config A\n\tbool \"a\"\nmenuconfig B\n\tbool\n")
    assert kconfig_fragments.split_missing(["CONFIG_A=y", "CONFIG_C=y", "CONFIG_B=n"], tree) == \
        (["CONFIG_A=y", "CONFIG_B=n"], ["CONFIG_C=y"])


def test_tarball_source_is_keyed_by_its_content(tree: Path, tmp_path: Path) -> None:
    """`--source linux-x.tar.xz`: imported once into the cache; its identity is the content's git tree, the same
    as the plain tree it was packed from."""
    tarball = tmp_path / "linux-tiny.tar.xz"
    subprocess.run(["tar", "-cJf", str(tarball), "-C", str(tree.parent), tree.name], check=True)
    from_tar = source.resolve(str(tarball))
    assert from_tar.tree == source.resolve(str(tree)).tree
    assert source.resolve(str(tarball)).commit == from_tar.commit          # cached, not imported again


def test_workspace_reaches_a_reimported_source(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A tarball whose mtime changed is imported again: same tree, new commit, new directory. The workspace,
    keyed by the tree, borrowed the old import's objects; it must reach the new commit (this failed a 6.8 build
    with "failed to unpack tree object")."""
    old, _ = repo
    new = tmp_path / "reimport"
    subprocess.run(["cp", "-a", str(old), str(new)], check=True)
    subprocess.run(["rm", "-rf", str(new / ".git")], check=True)
    source.git("init", "-q", cwd=new)
    source.git("add", ".", cwd=new)
    source.git("commit", "-q", "-m", "base again", "--date", "2001-01-01T00:00:00", cwd=new)
    commit = source.git("rev-parse", "HEAD", cwd=new)
    ws = tmp_path / "ws"
    source.git("clone", "-q", "--shared", "--no-checkout", str(old), str(ws))
    missing = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ws, capture_output=True)
    assert missing.returncode != 0
    src = source.Source("s", new, commit, source.git("rev-parse", f"{commit}^{{tree}}", cwd=new))
    build._reach(ws, src)
    build._reach(ws, src)     # idempotent: one alternates line per import
    assert source.git("rev-parse", f"{commit}^{{tree}}", cwd=ws) == src.tree
    lines = (ws / ".git" / "objects" / "info" / "alternates").read_text().split()
    assert lines == [str(old / ".git" / "objects"), str(new / ".git" / "objects")]
