"""`kvds io fio-check --rate N`: kvds and fio in open loop at the same rate, both waiting by sleeping, compared on
the same clock (submission -> completion); the spinning wait, which fio cannot do here, is refused as bad input."""

from __future__ import annotations

import json
from pathlib import Path

from harness import doctor
from io_priority import fio
from io_priority.device import Device, Layout
from io_priority.workload import Workload
from tests.conftest import run_kvds


def _job(**kw: object) -> list[str]:
    dev = Device("/dev/loop9", "kvds-loop", None, Layout(32 << 20, 32 << 20))
    return fio.fio_job(dev, Workload(**kw), Path("/x/fio"))  # type: ignore[arg-type]


def test_fio_job_open_loop_uses_rate_limiter() -> None:
    closed = _job(rate=0.0)
    assert not any(a.startswith("--rate") for a in closed) and "--iodepth=1" in closed
    opened = _job(rate=200.0, wait="sleep")
    assert "--rate_iops=200" in opened and "--rate_process=linear" in opened
    assert fio.mode_name(Workload(rate=200.0)) == "open-loop 200/s, wait sleep"


def test_fio_check_refuses_spin(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["io", "fio-check", "--rate", "200", "--wait", "spin"], kvds_env, timeout=60)
    assert res.returncode == 2 and "spin" in res.stderr and "Traceback" not in res.stderr


@doctor.skip_unless("loop", "fio")
@doctor.skip_unless("root")
def test_open_loop_check_runs_both_tools_at_the_rate(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["io", "fio-check", "--rate", "300", "--duration", "1", "--reps", "1", "--kv-mib", "16",
                    "--spill-mib", "16", "--json"], kvds_env, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    env = json.loads(res.stdout)  # harness/emit.py's envelope
    doc = {"run": env["run"], **env["summary"]}
    assert doc["config"]["mode"] == "open-loop 300/s, wait sleep" and doc["mode"] == doc["config"]["mode"]
    assert "--rate_iops=300" in doc["fio_command"]
    # open loop: each tool issued about rate x duration reads (a closed-loop fio would issue thousands)
    for tool in ("kvds", "fio"):
        assert 240 <= doc["tools"][tool]["reads"] <= 330, (tool, doc["tools"][tool]["reads"])
    assert set(doc["verdicts"]) == {"p50", "p99"} and doc["goal"]["status"] == "inconclusive"  # one repetition
    assert doc["tools"]["kvds"]["end_to_end_us"]["p50"]["value"] >= doc["tools"]["kvds"]["latency_us"]["p50"]["value"]


def test_open_loop_verdict_needs_p50_and_p99_within_the_band() -> None:
    inside = {"value": 1.0, "lo": 0.95, "hi": 1.05, "conf": 0.95}
    outside = {"value": 1.5, "lo": 1.3, "hi": 1.7, "conf": 0.95}
    closed = {"mode": "unloaded-qd1", "p50_ratio_kvds_over_fio": inside, "p99_ratio_kvds_over_fio": outside}
    assert fio.summary_verdict(closed).status == "met"  # closed loop: judged on p50, as before
    opened = {**closed, "mode": "open-loop 200/s, wait sleep"}
    v = fio.summary_verdict(opened)
    assert v.status == "missed" and "p99 kvds/fio" in v.goal
    assert fio.summary_verdict({**opened, "p99_ratio_kvds_over_fio": inside}).status == "met"
