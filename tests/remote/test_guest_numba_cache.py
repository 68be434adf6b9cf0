"""The guest's numba cache survives between guest runs: seeded into the share, copied back with what the guest
compiled, a newer index replacing an older one and nothing the destination already holds newer overwritten."""
from __future__ import annotations

import os
from pathlib import Path

from harness.remote.guest import _numba_cache


def test_the_cache_copies_missing_and_newer_files_only(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "kv_policy_x").mkdir(parents=True)
    (src / "kv_policy_x" / "f.nbi").write_text("index v2")
    (src / "kv_policy_x" / "f.1.nbc").write_text("code")
    (dest / "kv_policy_x").mkdir(parents=True)
    (dest / "kv_policy_x" / "f.nbi").write_text("index v1")
    (dest / "kv_policy_x" / "g.nbi").write_text("other")
    os.utime(dest / "kv_policy_x" / "f.nbi", (1, 1))
    _numba_cache(src, dest)
    assert (dest / "kv_policy_x" / "f.nbi").read_text() == "index v2"
    assert (dest / "kv_policy_x" / "f.1.nbc").read_text() == "code"
    assert (dest / "kv_policy_x" / "g.nbi").read_text() == "other"
    os.utime(src / "kv_policy_x" / "f.nbi", (0, 0))
    (src / "kv_policy_x" / "f.nbi").write_text("stale")
    os.utime(src / "kv_policy_x" / "f.nbi", (0, 0))
    _numba_cache(src, dest)
    assert (dest / "kv_policy_x" / "f.nbi").read_text() == "index v2"
    _numba_cache(tmp_path / "absent", dest)  # nothing cached yet: nothing copied, no error
