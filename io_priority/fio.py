"""`kvds io fio-check`: kvds's unloaded QD1 reader against fio's on the same device and region.

Both do random bs-aligned O_DIRECT reads over the KV region at queue depth 1 (closed loop) with the same
engine. fio logs every read's total latency (`write_lat_log`, `log_avg_msec=0`), so both sides are summarised
from raw samples the same way; repetitions alternate kvds/fio (ABBA). The goal is two-sided: kvds p50 / fio p50
within 1 +- 10%, judged from the ratio's interval over repetitions (a reader that under-reports is as wrong as
one that over-reports).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from harness import stats
from harness.knobs import create_dir, workers
from harness.paths import work_dir
from harness.progress import progress
from io_priority.bench import QNAMES, QS, _est, fmt_est, fmt_value
from io_priority.device import Device
from io_priority.workload import Runner, Workload

SCHEMA = "kvds.io-fio-check/1"
GOAL_P50_RATIO = 1.10   # the upper edge of the band (kept for readers of older summaries)
GOAL_TOLERANCE = 0.10   # within 1 +- 10%


def fio_job(dev: Device, w: Workload, log_prefix: Path) -> list[str]:
    return ["fio", "--name=kvds-qd1", f"--filename={dev.path}", "--direct=1", "--rw=randread", f"--bs={w.read_bs}",
            "--offset=0", f"--size={dev.layout.kv_bytes}", f"--ioengine={w.engine}", "--iodepth=1",
            f"--runtime={w.duration_s:g}", "--time_based", "--norandommap", "--randrepeat=0",
            f"--write_lat_log={log_prefix}", "--log_avg_msec=0", "--output-format=json"]


def run_fio(dev: Device, w: Workload, scratch: Path, tag: str) -> tuple[np.ndarray, dict[str, Any]]:
    prefix = scratch / f"fio-{tag}"
    res = subprocess.run(fio_job(dev, w, prefix), capture_output=True, text=True, cwd=scratch,
                         preexec_fn=workers.dies_with_me())  # a killed fio-check must not leave fio reading
    if res.returncode != 0:
        raise RuntimeError(f"fio failed: {res.stderr.strip()[:400]}")
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    logs = sorted(scratch.glob(f"fio-{tag}_lat*.log"))
    lat = np.concatenate([np.loadtxt(p, delimiter=",", usecols=1, dtype=np.int64, ndmin=1) for p in logs])
    for p in scratch.glob(f"fio-{tag}_*.log"):
        p.unlink()
    job = doc["jobs"][0]["read"]
    return lat, {"ios": job["total_ios"], "fio_lat_p50_ns": job["lat_ns"].get("percentile", {}).get("50.000000"),
                 "fio_mean_ns": job["lat_ns"]["mean"], "fio_version": doc.get("fio version")}


# io_uring A/B (--uring-ab): ioload's earlier ring set-up and reap sequence next to today's, in the same
# alternation, so the cause of a kvds/fio gap is measured rather than guessed.
URING_VARIANTS = {
    "kvds-plain-wait": ["--uring-flags", "plain", "--reap", "wait"],  # no set-up flags, submit+wait in one enter
    "kvds-plain": ["--uring-flags", "plain", "--reap", "fio"],       # no set-up flags, fio's enter sequence
    "kvds-wait": ["--uring-flags", "fio", "--reap", "wait"],         # fio's set-up flags, one enter
}


def check(dev: Device, w: Workload, reps: int,
          uring_ab: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    closed = Workload(**{**w.as_dict(), "rate": 0.0})
    scratch = create_dir(work_dir() / f"io-fio-{os.getpid()}-{secrets.token_hex(3)}")
    runner = Runner(dev, closed, None)
    extra = URING_VARIANTS if uring_ab and w.engine == "io_uring" else {}
    order = stats.alternating_order(["kvds", "fio", *extra], reps)
    groups: dict[str, list[np.ndarray]] = {"kvds": [], "fio": [], **{name: [] for name in extra}}
    fio_meta: list[dict[str, Any]] = []
    with progress("io fio-check", total=len(order)) as bar:
        for i, (rep, name) in enumerate(order):
            if name == "kvds":
                groups["kvds"].append(runner.run(None, seed=i).latencies_ns)
            elif name in extra:
                groups[name].append(runner.run(None, seed=i, reader_extra=extra[name]).latencies_ns)
            else:
                lat, meta = run_fio(dev, closed, scratch, str(i))
                groups["fio"].append(lat)
                fio_meta.append(meta)
            bar.advance()
    shutil.rmtree(scratch, ignore_errors=True)
    tools = {}
    for name, g in groups.items():
        boot = stats.rep_percentiles(g, QS)
        tools[name] = {"reads": int(sum(x.size for x in g)), "latency_us": {QNAMES[q]: _est(boot[q], 1e-3) for q in QS},
                       "per_rep_p50_us": [float(np.percentile(x, 50)) / 1e3 for x in g]}
    ratio = stats.rep_ratio(groups["kvds"], groups["fio"], q=50.0)
    v = verdict(ratio)
    for name in extra:
        tools[name]["p50_ratio_over_fio"] = _est(stats.rep_ratio(groups[name], groups["fio"], q=50.0))
        tools[name]["ioload_options"] = " ".join(extra[name])
    summary = {"rep_order": [[r, n] for r, n in order], "tools": tools, "fio_runs": fio_meta,
               "p50_ratio_kvds_over_fio": _est(ratio), "goal_p50_ratio_max": GOAL_P50_RATIO,
               "fio_command": " ".join(fio_job(dev, closed, Path("<scratch>/fio"))),
               "goal": v.as_dict(), "goal_text": str(v), "meets_goal": v.met}
    samples = {name: np.concatenate(g).astype(np.int64) for name, g in groups.items()}
    return summary, samples


def verdict(ratio: stats.Estimate) -> stats.Verdict:
    """kvds p50 / fio p50 within 1 +- 10%, from the whole interval (two-sided)."""
    return stats.judge_within(ratio, 1.0, GOAL_TOLERANCE, "p50 kvds/fio ")


def print_check(summary: dict[str, Any]) -> None:
    cfg = summary["config"]
    print(f"unloaded QD1 {cfg['workload']['read_bs'] // 1024} KiB random O_DIRECT reads, engine {cfg['engine']}, "
          f"{cfg['device']['path']} ({cfg['scheduler']}), {cfg['reps']} alternating reps x {cfg['workload']['duration_s']:g} s")
    for name, t in summary["tools"].items():
        lat = t["latency_us"]
        print(f"  {name:5s} reads {t['reads']:7d}  p50 {fmt_est(lat['p50'], ' us', 1)}  p99 {fmt_est(lat['p99'], ' us')}"
              f"  p99.9 {fmt_value(lat['p99.9'])}  per-rep p50 {', '.join(f'{x:.1f}' for x in t['per_rep_p50_us'])}")
    for name, t in summary["tools"].items():
        if "p50_ratio_over_fio" in t:
            print(f"  {name} ({t['ioload_options']}): p50 / fio = {fmt_est(t['p50_ratio_over_fio'], '', 3)}")
    r = summary["p50_ratio_kvds_over_fio"]
    print(f"  p50 kvds/fio = {fmt_est(r, '', 3)}")
    print(f"  verdict: {stats.verdict_from_dict(summary.get('goal'))}")
