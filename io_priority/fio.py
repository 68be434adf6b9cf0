"""`kvds io fio-check`: kvds's unloaded reader against fio's on the same device and region.

Both do random bs-aligned O_DIRECT reads over the KV region at queue depth 1 with the same engine, in one of two
modes:
- closed loop (`--rate 0`, the default here): the next read is submitted when the last completes;
- open loop (`--rate N`): N reads/s on a fixed schedule. fio: `rate_iops=N`, `rate_process=linear` (evenly
  spaced), waiting between reads by sleeping (its rate limiter's usec_sleep), as kvds's `--wait sleep` does.
  fio has no spinning rate limiter, and its spinning think time (`thinktime_spin`) issued one read in 2 s on this
  host (fio 3.33: `--thinktime=5000us --thinktime_spin=5000us` -> total_ios 1), so there is no fio reference for
  `--wait spin`: fio-check refuses it (exit 2) and `kvds io bench --wait spin` measures kvds alone.
fio logs every read's latency from submission to completion (`write_lat_log`, `log_avg_msec=0`); kvds's figure
compared with it is the same clock: the service time (submit -> complete; kvds's end-to-end figure, measured from
the intended time, has no fio counterpart and is reported beside it). Both sides are summarised from raw samples
the same way; repetitions alternate kvds/fio (ABBA). The goal is two-sided: kvds / fio within 1 +- 10% for p50
(and, open loop, p99), judged from the ratios' intervals over repetitions (a reader that under-reports is as
wrong as one that over-reports).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import numpy as np

from harness import stats
from harness.knobs import create_dir, workers
from harness.paths import work_dir
from harness.progress import progress
from io_priority.variant_figures import QNAMES, QS, _est
from io_priority import pairing
from io_priority.device import Device
from io_priority.workload import Runner, Workload

GOAL_P50_RATIO = 1.10   # the upper edge of the band (kept for readers of older summaries)
GOAL_TOLERANCE = 0.10   # within 1 +- 10%


def fio_job(dev: Device, w: Workload, log_prefix: Path) -> list[str]:
    """One pure function builds fio's command: closed loop at QD1, or open loop at w.rate with w.wait."""
    cmd = ["fio", "--name=kvds-qd1", f"--filename={dev.path}", "--direct=1", "--rw=randread", f"--bs={w.read_bs}",
           "--offset=0", f"--size={dev.layout.kv_bytes}", f"--ioengine={w.engine}", "--iodepth=1",
           f"--runtime={w.duration_s:g}", "--time_based", "--norandommap", "--randrepeat=0",
           f"--write_lat_log={log_prefix}", "--log_avg_msec=0", "--output-format=json"]
    if w.rate > 0:
        cmd += [f"--rate_iops={w.rate:g}", "--rate_process=linear"]
    return cmd


def run_fio(dev: Device, w: Workload, scratch: Path, tag: str,
            echo: Callable[[str, list[str]], None] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    prefix = scratch / f"fio-{tag}"
    argv = fio_job(dev, w, prefix)
    if echo is not None:
        echo("fio", argv)
    res = subprocess.run(argv, capture_output=True, text=True, cwd=scratch,
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
                 "fio_mean_ns": job["lat_ns"]["mean"], "fio_version": doc.get("fio version"), "argv": argv}


# io_uring A/B (--uring-ab): ioload's earlier ring set-up and reap sequence next to today's, in the same
# alternation, so the cause of a kvds/fio gap is measured rather than guessed.
URING_VARIANTS = {
    "kvds-plain-wait": ["--uring-flags", "plain", "--reap", "wait"],  # no set-up flags, submit+wait in one enter
    "kvds-plain": ["--uring-flags", "plain", "--reap", "fio"],       # no set-up flags, fio's enter sequence
    "kvds-wait": ["--uring-flags", "fio", "--reap", "wait"],         # fio's set-up flags, one enter
}


def mode_name(w: Workload) -> str:
    return "unloaded-qd1" if w.rate <= 0 else f"open-loop {w.rate:g}/s, wait {w.wait}"


def check(dev: Device, w: Workload, reps: int, uring_ab: bool = False,
          echo: Callable[[str, list[str]], None] | None = None,
          ) -> tuple[dict[str, Any], dict[str, np.ndarray], list[dict[str, Any]]]:
    """The figures (FioCheckSummary's fields but schema and config), the samples to file, and every helper
    command run (ioload reader, fio) in the order run."""
    closed = w  # closed loop when w.rate is 0 (the CLI's default for fio-check), else open loop
    scratch = create_dir(work_dir() / f"io-fio-{os.getpid()}-{secrets.token_hex(3)}")
    runner = Runner(dev, closed, None, echo)
    commands: list[dict[str, Any]] = []
    e2e: list[np.ndarray] = []
    wake: list[np.ndarray] = []
    extra = URING_VARIANTS if uring_ab and w.engine == "io_uring" else {}
    order = stats.alternating_order(["kvds", "fio", *extra], reps)
    groups: dict[str, list[np.ndarray]] = {"kvds": [], "fio": [], **{name: [] for name in extra}}
    fio_meta: list[dict[str, Any]] = []
    with progress("io fio-check", total=len(order)) as bar:
        for i, (rep, name) in enumerate(order):
            if name == "kvds":
                r = runner.run(None, seed=i)
                commands.append({"tool": name, "rep": rep, **(r.argv or {})})
                # the clock fio measures: submission -> completion (closed loop: the same as the latency)
                groups["kvds"].append(r.service_clock_ns if r.has_clocks else r.latencies_ns)
                e2e.append(r.latencies_ns)
                if r.has_clocks:
                    wake.append(r.wakeup_ns)
            elif name in extra:
                r = runner.run(None, seed=i, reader_extra=extra[name])
                commands.append({"tool": name, "rep": rep, **(r.argv or {})})
                groups[name].append(r.service_clock_ns if r.has_clocks else r.latencies_ns)
            else:
                lat, meta = run_fio(dev, closed, scratch, str(i), echo)
                groups["fio"].append(lat)
                commands.append({"tool": name, "rep": rep, "fio": meta.pop("argv")})
                fio_meta.append(meta)
            bar.advance()
    shutil.rmtree(scratch, ignore_errors=True)
    tools = {}
    for name, g in groups.items():
        boot = stats.rep_percentiles(g, QS)
        tools[name] = {"reads": int(sum(x.size for x in g)), "latency_us": {QNAMES[q]: _est(boot[q], 1e-3) for q in QS},
                       "per_rep_p50_us": [float(np.percentile(x, 50)) / 1e3 for x in g]}
    # repetition r of kvds and of fio ran back to back (one round of the alternation): the ratios are resampled by
    # pair, so the device's drift both tools follow cancels (io_priority.pairing)
    pairs = pairing.side_by_side(order, "kvds", "fio")
    ratio, how = pairing.ratio(groups["kvds"], groups["fio"], pairs, q=50.0)
    ratio99, how99 = pairing.ratio(groups["kvds"], groups["fio"], pairs, q=99.0)
    v50 = verdict(ratio)
    v99 = stats.judge_within(ratio99, 1.0, GOAL_TOLERANCE, "p99 kvds/fio ")
    # closed loop: p50 (as before); open loop: p50 and p99 both (summary_verdict, the report's rule too)
    v = summary_verdict({"mode": mode_name(closed), "p50_ratio_kvds_over_fio": _est(ratio),
                         "p99_ratio_kvds_over_fio": _est(ratio99)})
    if e2e:
        boot = stats.rep_percentiles(e2e, QS)
        tools["kvds"]["end_to_end_us"] = {QNAMES[q]: _est(boot[q], 1e-3) for q in QS}
    if wake:
        boot = stats.rep_percentiles(wake, (50.0, 99.0))
        tools["kvds"]["wakeup_us"] = {QNAMES[q]: _est(boot[q], 1e-3) for q in (50.0, 99.0)}
    for name in extra:
        tools[name]["p50_ratio_over_fio"] = _est(stats.rep_ratio(groups[name], groups["fio"], q=50.0))
        tools[name]["ioload_options"] = " ".join(extra[name])
    summary = {"rep_order": [[r, n] for r, n in order], "tools": tools, "fio_runs": fio_meta,
               "p50_ratio_kvds_over_fio": {**_est(ratio), "pairing": how},
               "p99_ratio_kvds_over_fio": {**_est(ratio99), "pairing": how99},
               "goal_p50_ratio_max": GOAL_P50_RATIO, "mode": mode_name(closed), "wait": closed.wait,
               "compared_clock": "submission -> completion (kvds service time, fio lat)",
               "fio_command": " ".join(fio_job(dev, closed, Path("<scratch>/fio"))),
               "goal": v.as_dict(), "goal_text": str(v), "meets_goal": v.met,
               "verdicts": {"p50": v50.as_dict(), "p99": v99.as_dict()}}
    samples = {name: np.concatenate(g).astype(np.int64) for name, g in groups.items()}
    # per repetition too, so a stored check can be judged again by pair (<tool>-rep<k>, k-th repetition of a tool)
    samples.update({f"{name}-rep{k}": x.astype(np.int64) for name, g in groups.items() for k, x in enumerate(g)})
    return summary, samples, commands


def summary_verdict(s: dict[str, Any]) -> stats.Verdict:
    """A stored fio-check judged again by today's rule: p50 in closed loop; p50 and p99 both in open loop."""
    def est(d: dict[str, Any] | None) -> stats.Estimate:
        from io_priority.variant_figures import estimate_of

        return estimate_of(d)

    v50 = verdict(est(s.get("p50_ratio_kvds_over_fio")))
    if not str(s.get("mode", "")).startswith("open-loop"):
        return v50
    v99 = stats.judge_within(est(s.get("p99_ratio_kvds_over_fio")), 1.0, GOAL_TOLERANCE, "p99 kvds/fio ")
    parts = [v50, v99]
    return stats.Verdict(stats.judge_all(parts), " and ".join(p.goal for p in parts), v50.estimate,
                         "; ".join(str(p) for p in parts))


def verdict(ratio: stats.Estimate) -> stats.Verdict:
    """kvds p50 / fio p50 within 1 +- 10%, from the whole interval (two-sided)."""
    return stats.judge_within(ratio, 1.0, GOAL_TOLERANCE, "p50 kvds/fio ")


