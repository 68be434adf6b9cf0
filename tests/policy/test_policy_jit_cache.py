"""numba's compiled-function cache is keyed by source content, so a fresh clone reuses what another compiled.

Real numba in fresh interpreters: whichever kv_policy module is imported first, every compiled function's cache
sits under kvds's cache directory, in a directory named after its source's content (kv_policy/jit.py says why).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kv_policy.jit import ContentCacheLocator
from tests.conftest import REPO

COMPILED = ("kv_policy.simulator_enu", "kv_policy.enu_compiled", "kv_policy.simulator_fast",
            "kv_policy.policies.engine_keys")

PROBE = """
import importlib, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
from numba.core.registry import CPUDispatcher  # after: the probe must not import numba before kvds does
for m in sys.argv[1:]:
    for obj in vars(sys.modules[m]).values():
        if isinstance(obj, CPUDispatcher) and obj.__module__ == m:
            print(m, type(obj._cache._impl._locator).__name__, obj._cache._cache_path)
"""


@pytest.mark.parametrize("first", COMPILED)
def test_every_compiled_function_caches_by_content_whatever_is_imported_first(first: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["KVDS_CACHE_DIR"] = str(tmp_path)
    order = [first, *(m for m in COMPILED if m != first)]
    out = subprocess.run([sys.executable, "-c", PROBE, *order], env=env, cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert {line.split()[0] for line in out} == set(COMPILED)
    for line in out:
        module, locator, path = line.split()
        stem = module.rsplit(".", 1)[1]
        source = REPO / (module.replace(".", "/") + ".py")
        assert locator == "ContentCacheLocator", line
        assert Path(path).parent == tmp_path / "numba", line
        assert Path(path).name == ContentCacheLocator.get_suitable_cache_subpath(str(source)), line
        assert Path(path).name.startswith(f"{source.parent.name}-{stem}-"), line


def test_same_content_elsewhere_shares_the_directory_and_changed_content_does_not(tmp_path: Path) -> None:
    a, b, c = (tmp_path / d / "kv_policy" / "simulator_fast.py" for d in ("clone1", "clone2", "clone3"))
    for p in (a, b, c):
        p.parent.mkdir(parents=True)
    text = (REPO / "kv_policy" / "simulator_fast.py").read_text()
    a.write_text(text)
    b.write_text(text)
    c.write_text(text + "\n# changed\n")
    sub = ContentCacheLocator.get_suitable_cache_subpath
    assert sub(str(a)) == sub(str(b)) != sub(str(c))
