"""The results store: meta with the environment, raw samples as .npy, atomic writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.atomic import write_text
from harness.errors import UserError
from harness.results import ResultStore


def test_run_records_environment_and_samples(tmp_path) -> None:
    store = ResultStore(tmp_path)
    run = store.new_run("unit", {"device": "/dev/loop9", "mapping": "intent"})
    env = run.meta["environment"]
    for key in ("host", "kernel", "kvds_revision", "packages", "time_utc", "argv", "cpus"):
        assert key in env
    assert run.meta["config"]["device"] == "/dev/loop9"
    lat = np.array([100, 2000, 35000], dtype=np.int64)
    run.write_samples("critical", lat)
    assert run.samples("critical").dtype == np.int64 and list(run.samples("critical")) == [100, 2000, 35000]
    raw = (run.path / "samples" / "critical.npy").read_bytes()
    assert raw.startswith(b"\x93NUMPY") and len(raw) < 200  # binary, not a JSON list
    run.write_summary({"p99_us": 35.0})
    assert store.get(run.run_id[:20]).summary == {"p99_us": 35.0}
    assert store.get("latest").run_id == run.run_id


def test_atomic_write_leaves_old_file_on_failure(tmp_path) -> None:
    target = tmp_path / "summary.json"
    write_text(target, json.dumps({"v": 1}))

    class Boom(str):
        def encode(self, *a):  # type: ignore[override]
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_text(target, Boom("x"))
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_unknown_run(tmp_path) -> None:
    with pytest.raises(UserError, match="not found"):
        ResultStore(tmp_path).get("nosuch")
