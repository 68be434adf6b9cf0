"""What the probes cost: IOPS of a single-threaded O_DIRECT random-read loop on a kvds loop device, with and
without the probes attached, in ABBA order (harness.stats.alternating_order) so drift hits both alike.

Each "with" run compiles and attaches afresh, so the same command also yields load-and-attach times.

The goal: with the probes attached the loop keeps >= 95% of its IOPS, judged by harness.stats' one rule (met only
when the whole interval is >= 0.95) on the geometric mean of the paired with/without ratios (a t interval on their
logarithms): on a loaded host a pair's ratio swings both ways, and the arithmetic mean of ratios leans upward.
"""

from __future__ import annotations

import mmap
import os
import random
import time
from typing import Any, Sequence

import numpy as np

from harness import stats
from harness.knobs import create_file, loop_attach, scheduler_of, sysctl
from harness.paths import work_dir
from harness.progress import progress
from harness.results import ResultStore

from ebpf.recorder import Recorder

GOAL_IOPS_KEPT = 0.95  # probes may cost at most 5% of a single-threaded O_DIRECT read loop's IOPS


def read_loop(dev: str, seconds: float, block: int, seed: int) -> tuple[int, float]:
    """(reads done, elapsed s) of random aligned O_DIRECT reads for `seconds`."""
    size = os.path.getsize(dev) if not dev.startswith("/dev/") else _blockdev_size(dev)
    nblocks = size // block
    rng = random.Random(seed)
    offsets = [rng.randrange(nblocks) * block for _ in range(1 << 16)]
    buf = mmap.mmap(-1, block)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    n = 0
    try:
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for i in range(256):
                os.preadv(fd, [buf], offsets[(n + i) & 0xFFFF])
            n += 256
            now = time.perf_counter()
            if now >= end:
                return n, now - t0
    finally:
        os.close(fd)


def _blockdev_size(dev: str) -> int:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def measure_overhead(probes: Sequence[str], reps: int = 4, seconds: float = 3.0, size_mib: int = 256,
                     block_kib: int = 4, backend: str | None = None, prog_stats: bool = False) -> dict[str, Any]:
    """prog_stats: set kernel.bpf_stats_enabled=1 (through the journal) and report, per program, runs per read
    and ns inside the program; the accounting itself costs two clock reads per program run."""
    if prog_stats:
        sysctl("kernel.bpf_stats_enabled", 1)
    backing = create_file(work_dir() / f"ebpf-overhead-{os.getpid()}-{time.time_ns()}", size_mib << 20, fill=b"k")
    dev = loop_attach(backing)
    block = block_kib << 10
    read_loop(dev, 0.5, block, seed=99)  # warm-up: loop worker, page tables, Python code paths
    load_s: list[float] = []
    used: set[str] = set()

    def without(rep: int) -> float:
        n, el = read_loop(dev, seconds, block, seed=rep)
        return n / el

    def with_probes(rep: int) -> float:
        rec = Recorder(probes, devices=[dev], backend=backend)
        rec.start()
        load_s.append(rec.load_seconds or 0.0)
        used.add((rec.backend or "none") + (f" ({rec.backend_detail})" if rec.backend_detail else ""))
        try:
            n, el = read_loop(dev, seconds, block, seed=rep)
        finally:
            rec.stop()
        counted = sum(h["count"] for name, h in rec.histograms() if "issue_to_complete" in name)
        counts.append((n, counted))
        missed.append(sum(rec.results().get("missed_events", {}).values()))
        unfinished.append(sum(c["unfinished"] for classes in rec.results()["blk"]["accounting"].values()
                              for ops in classes.values() for c in ops.values()) if "blk" in rec.results() else 0)
        for tp, (runs, ns) in rec.program_stats.items():
            acc = in_program.setdefault(tp, [0, 0])
            acc[0], acc[1] = acc[0] + runs, acc[1] + ns
        reads_with.append(n)
        return n / el

    counts: list[tuple[int, int]] = []
    in_program: dict[str, list[int]] = {}  # tracepoint -> [runs, ns], summed over the 'with' runs
    reads_with: list[int] = []
    missed: list[int] = []  # program runs the kernel skipped per 'with' run (all devices; see README)
    unfinished: list[int] = []  # reads issued whose completion never reached the programs, per 'with' run
    order = stats.alternating_order(["without", "with"], reps)
    with progress("overhead runs", total=len(order)) as bar:
        out = stats.run_alternating({"without": without, "with": with_probes}, reps,
                                    on_step=lambda r, name: bar.advance())
    wo, wi = np.array(out["without"]), np.array(out["with"])
    ratios = wi / wo  # per repetition: the pair ran back to back
    ci = stats.mean_ci(list(ratios))
    geo = paired_ratio(ratios)
    v = verdict(geo)
    res = {
        "probes": list(probes), "backend": ",".join(sorted(used)), "loadavg": [round(x, 2) for x in os.getloadavg()],
        "device": dev, "scheduler": scheduler_of(dev), "reps": reps, "seconds": seconds,
        "block_bytes": block, "order": [f"{r}:{n}" for r, n in order],
        "iops_without": [round(float(x), 1) for x in wo], "iops_with": [round(float(x), 1) for x in wi],
        "median_iops_without": round(float(np.median(wo)), 1), "median_iops_with": round(float(np.median(wi)), 1),
        "ratio_mean": round(float(ci.value), 4), "ratio_ci95": [round(float(ci.lo), 4), round(float(ci.hi), 4)],
        "loss_pct": round(float(100 * (1 - ci.value)), 2),
        "ratio_geomean": geo.as_dict(),
        "goal": v.as_dict(), "goal_text": str(v),
        "load_attach_s": [round(x, 3) for x in load_s],
        "reads_vs_histogram_counts": counts, "missed_events_per_run": missed, "unfinished_per_run": unfinished,
    }
    if prog_stats:
        reads = max(sum(reads_with), 1)
        res["program_stats"] = {tp: {"runs_per_read": round(r / reads, 3), "ns_per_run": round(ns / max(r, 1), 1),
                                     "ns_per_read": round(ns / reads, 1)} for tp, (r, ns) in sorted(in_program.items())}
        res["program_ns_per_read"] = round(sum(ns for _, ns in in_program.values()) / reads, 1)
    run = ResultStore().new_run("ebpf-overhead", {k: res[k] for k in ("probes", "backend", "device", "scheduler", "reps",
                                                                       "seconds", "block_bytes")})
    run.write_samples("iops_without", wo)
    run.write_samples("iops_with", wi)
    run.write_samples("load_attach_s", np.array(load_s))
    run.write_summary(res)
    res["run"] = str(run.path)
    return res


def paired_ratio(ratios: Any) -> stats.Estimate:
    """Geometric mean of per-pair ratios with a Student t interval on their logs (none below MIN_REPS pairs)."""
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r) & (r > 0)]
    if not r.size:
        return stats.Estimate(float("nan"), float("nan"), float("nan"), reason="no data", n=0)
    e = stats.mean_ci(list(np.log(r)))
    lo, hi = (float(np.exp(x)) if x == x else float("nan") for x in (e.lo, e.hi))
    return stats.Estimate(float(np.exp(e.value)), lo, hi, e.conf, e.reason, int(r.size))


def verdict(ratio: stats.Estimate) -> stats.Verdict:
    """IOPS with the probes / without, per repetition pair: at least GOAL_IOPS_KEPT over the whole interval."""
    return stats.judge_at_least(ratio, GOAL_IOPS_KEPT, "IOPS with/without ")


def summary_verdict(s: dict[str, Any]) -> stats.Verdict:
    """The goal re-judged from a stored summary.json with today's rule: from the geometric mean's estimate, or
    (a run from before it was stored) recomputed from the per-repetition IOPS."""
    if s.get("ratio_geomean"):
        g = s["ratio_geomean"]
        return verdict(stats.Estimate(_nan(g.get("value")), _nan(g.get("lo")), _nan(g.get("hi")), g.get("conf", 0.95),
                                      g.get("reason", "")))
    wo, wi = s.get("iops_without") or [], s.get("iops_with") or []
    return verdict(paired_ratio([b / a for a, b in zip(wo, wi) if a]))


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)


def format_overhead(res: dict[str, Any]) -> str:
    lines = [
        f"O_DIRECT {res['block_bytes'] // 1024} KiB random reads, 1 thread, {res['device']} "
        f"(loop, scheduler {res['scheduler']}), {res['reps']} x {res['seconds']:g} s per variant, ABBA order",
        f"  without probes: IOPS {res['iops_without']} (median {res['median_iops_without']})",
        f"  with {','.join(res['probes'])} ({res['backend']} backend): IOPS {res['iops_with']} (median {res['median_iops_with']})",
        f"  with/without (mean of paired ratios): {res['ratio_mean']} "
        + (f"95% CI {res['ratio_ci95']}" if None not in res["ratio_ci95"] and all(x == x for x in res["ratio_ci95"])
           else f"(point estimate: {res['reps']} repetitions < {stats.MIN_REPS}, no interval)")
        + f" -> loss {res['loss_pct']}%",
        f"  geometric mean of the paired ratios (what the goal is judged on): {stats.Estimate(**{k: _nan(v) for k, v in res['ratio_geomean'].items() if k in ('value', 'lo', 'hi')})}",
        f"  verdict: {res['goal_text']}",
        f"  load+attach per 'with' run (s): {res['load_attach_s']}",
        f"  reads issued vs counted in the histograms: {res['reads_vs_histogram_counts']}",
        f"  program runs skipped by the kernel per 'with' run (all devices): {res['missed_events_per_run']}",
        f"  reads whose completion never reached the programs per 'with' run: {res.get('unfinished_per_run', '-')}",
        *([f"  inside the programs (kernel.bpf_stats_enabled): {res['program_ns_per_read']} ns per read"] +
          [f"    {tp:32s} {v['runs_per_read']:.2f} runs/read  {v['ns_per_run']:8.1f} ns/run  {v['ns_per_read']:8.1f} ns/read"
           for tp, v in res["program_stats"].items()] if "program_stats" in res else []),
        f"  load average at the end: {res['loadavg']}",
        f"  run: {res['run']}",
    ]
    return "\n".join(lines)
