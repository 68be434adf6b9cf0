"""Strict JSON everywhere: what kvds writes or prints with --json parses with any strict reader (no NaN)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness import doctor
from harness.results import ResultStore, dumps, strict
from tests.conftest import REPO, run_kvds


def _strict_loads(text: str) -> object:
    def bad(token: str) -> None:
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=bad)


def test_encoder_turns_missing_numbers_into_null() -> None:
    doc = {"p99": math.nan, "hi": np.float64(math.inf), "n": np.int64(3), "ok": np.bool_(True),
           "reps": (1.0, np.array([2.0, np.nan])), 7: "key"}
    assert _strict_loads(dumps(doc)) == {"p99": None, "hi": None, "n": 3, "ok": True, "reps": [1.0, [2.0, None]],
                                         "7": "key"}
    assert strict([-math.inf]) == [None]


def test_summary_files_are_strict(tmp_path: Path) -> None:
    run = ResultStore(tmp_path).new_run("x", {"limit": math.nan})
    run.write_summary({"p99": {"value": math.nan, "lo": math.inf}})
    assert _strict_loads((run.path / "summary.json").read_text()) == {"p99": {"value": None, "lo": None}}
    assert _strict_loads((run.path / "meta.json").read_text())["config"] == {"limit": None}


def _printed_json_sites() -> list[str]:
    """`print(json.dumps(...))` (or a returned json.dumps meant for stdout) anywhere in kvds: each is a --json path
    that bypasses the strict encoder."""
    out = []
    for path in REPO.rglob("*.py"):
        rel = path.relative_to(REPO)
        if rel.parts[0] in (".venv", "tests", "build") or "site-packages" in rel.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                for sub in ast.walk(node):
                    if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "dumps"
                            and getattr(sub.func.value, "id", None) == "json"):
                        out.append(f"{rel}:{node.lineno}")
    return out


def test_every_json_print_goes_through_the_strict_encoder() -> None:
    assert _printed_json_sites() == []


@doctor.skip_unless("root", "memcg", "swap.zram", "pagemap")
def test_vm_bench_json_is_strict(kvds_env: dict[str, str]) -> None:
    """One repetition of a 16 MiB arena: intervals and the p99s (400 re-accesses < 1000) are missing, and say so
    as null with a reason, not as NaN."""
    res = run_kvds(["vm", "bench", "--arena-mb", "16", "--reps", "1", "--json"], kvds_env, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = _strict_loads(res.stdout)
    p99 = doc["summary"]["headline"]["baseline_decode_critical_p99_us"]
    assert p99["value"] is None and "n too small" in p99["reason"]
    swapped = doc["summary"]["headline"]["baseline_decode_critical_swapped_out"]["mean"]
    assert swapped["lo"] is None and "n too small" in swapped["reason"]
