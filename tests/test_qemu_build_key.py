"""Build keys and configuration checks, on a tiny stand-in source tree (no kernel is compiled here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.errors import UserError
from qemu_validation import build, kconfig_fragments, source


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
    assert patches[0].startswith("0001-") and patches[1].startswith("0002-")
    assert kconfig_fragments.load(series / "config") == {"CONFIG_MM_INTENT": "y"}
    assert build.series_dir("broken-uaf")


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


def test_patches_apply_to_debian_source_and_pass_checkpatch(tmp_path: Path) -> None:
    """The series applies in order to the cached Debian tree (a scratch index: no checkout), and checkpatch
    --strict reports no errors. `kvds qemu build` applies the same files with `git am`."""
    import os

    from harness.paths import cache_dir
    repos = sorted((cache_dir() / "qemu" / "sources").glob("debian-6.12-*/.git"))
    if not repos:
        pytest.skip("Debian linux-source-6.12 not imported yet (run `kvds qemu build` once)")
    repo = repos[0].parent
    patches = [str(p) for n in ("mm_intent", "broken-uaf") for p in sorted(build.series_dir(n).glob("*.patch"))]
    env = dict(os.environ, GIT_INDEX_FILE=str(tmp_path / "index"))
    commit = source._pristine(repo, "x").commit
    subprocess.run(["git", "read-tree", commit], cwd=repo, env=env, check=True)
    for p in patches:
        r = subprocess.run(["git", "apply", "--cached", p], cwd=repo, env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"{Path(p).name}: {r.stderr}"
    check = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", "--terse", "--no-summary", *patches[:2]],
                           cwd=repo, capture_output=True, text=True)
    assert "ERROR:" not in check.stdout, check.stdout
