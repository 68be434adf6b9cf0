"""`kvds ebpf overhead`, what the probes cost: IOPS of a single-threaded O_DIRECT random-read loop on a kvds loop
device, with and without the probes attached, in ABBA order (harness.stats.alternating_order) so drift hits both
alike. Each "with" run loads and attaches afresh, so the same command also yields load-and-attach times.

The goal and its verdict: ebpf/overhead.py.
"""

from __future__ import annotations

import mmap
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import stats
from harness.knobs import create_file, loop_attach, scheduler_of, sysctl
from harness.paths import work_dir
from harness.progress import progress
from harness.results import Filed, ResultStore

from ebpf.overhead import paired_ratio, verdict
from ebpf.recorder import Recorder
from ebpf.summary import OverheadSummary

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


@dataclass(frozen=True)
class OverheadConfig:
    probes: tuple[str, ...]
    reps: int = 4                  # repetitions per variant, ABBA order
    seconds: float = 3.0           # seconds per run
    size_mib: int = 256            # the loop device's backing file
    block_kib: int = 4             # O_DIRECT read size
    prog_stats: bool = False       # kernel.bpf_stats_enabled=1 (journaled): runs and ns inside each program


def run(cfg: OverheadConfig) -> Filed[OverheadSummary]:
    """prog_stats: set kernel.bpf_stats_enabled=1 (through the journal) and report, per program, runs per read
    and ns inside the program; the accounting itself costs two clock reads per program run."""
    probes, reps, seconds = cfg.probes, cfg.reps, cfg.seconds
    if cfg.prog_stats:
        sysctl("kernel.bpf_stats_enabled", 1)
    backing = create_file(work_dir() / f"ebpf-overhead-{os.getpid()}-{time.time_ns()}", cfg.size_mib << 20,
                          fill=b"k")
    dev = loop_attach(backing)
    block = cfg.block_kib << 10
    read_loop(dev, 0.5, block, seed=99)  # warm-up: loop worker, page tables, Python code paths
    load_s: list[float] = []
    used: set[str] = set()

    def without(rep: int) -> float:
        n, el = read_loop(dev, seconds, block, seed=rep)
        return n / el

    def with_probes(rep: int) -> float:
        rec = Recorder(probes, devices=[dev])
        rec.start()
        load_s.append(rec.load_seconds or 0.0)
        used.add((rec.backend or "none") + (f" ({rec.backend_detail})" if rec.backend_detail else ""))
        try:
            n, el = read_loop(dev, seconds, block, seed=rep)
        finally:
            rec.stop()
        counted = sum(h["count"] for name, h in rec.histograms() if "issue_to_complete" in name)
        counts.append([n, counted])
        missed.append(sum(rec.results().get("missed_events", {}).values()))
        unfinished.append(sum(c["unfinished"] for classes in rec.results()["blk"]["accounting"].values()
                              for ops in classes.values() for c in ops.values()) if "blk" in rec.results() else 0)
        for tp, (runs, ns) in rec.program_stats.items():
            acc = in_program.setdefault(tp, [0, 0])
            acc[0], acc[1] = acc[0] + runs, acc[1] + ns
        reads_with.append(n)
        return n / el

    counts: list[list[int]] = []
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
    res: dict[str, Any] = {
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
    if cfg.prog_stats:
        reads = max(sum(reads_with), 1)
        res["program_stats"] = {tp: {"runs_per_read": round(r / reads, 3), "ns_per_run": round(ns / max(r, 1), 1),
                                     "ns_per_read": round(ns / reads, 1)} for tp, (r, ns) in sorted(in_program.items())}
        res["program_ns_per_read"] = round(sum(ns for _, ns in in_program.values()) / reads, 1)
    filed = ResultStore().new_run("ebpf-overhead", {k: res[k] for k in ("probes", "backend", "device", "scheduler",
                                                                         "reps", "seconds", "block_bytes")})
    filed.write_samples("iops_without", wo)
    filed.write_samples("iops_with", wi)
    filed.write_samples("load_attach_s", np.array(load_s))
    summary = OverheadSummary(**res)
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
