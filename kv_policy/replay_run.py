"""`kvds policy replay`: each policy's decisions executed as real memory reads and O_DIRECT I/O on this kernel, next to
the simulator's figures; filed as a `replay` run with every step's latency as raw samples."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.paths import work_dir
from kv_policy.compare import Capacity
from kv_policy.importers import TraceOptions, load_trace
from kv_policy.tiers import Tier
from harness.results import Filed, ResultStore, StoredSummary
from harness.stats import bootstrap_percentiles


@dataclass(frozen=True)
class ReplayConfig:
    trace: TraceOptions       # .npz (kvds), prototype JSONL, request CSV/JSONL, Mooncake or Azure trace
    policies: list[str]
    fast: Tier
    slow: Tier
    cap: Capacity
    work_dir: Path | None     # the loop device's backing file goes here (None: harness.paths.work_dir())
    mapping: str              # the intent->mechanism mapping supplying the ioprio classes
    scheduler: str            # I/O scheduler of the kvds loop device ('keep' leaves it)
    reps: int                 # replays per policy, in alternating order
    max_steps: int | None     # replay only the first N steps
    seed: int = 0             # batching seed when the trace is a request trace


@dataclass(frozen=True)
class ReplayRow(StoredSummary):
    """One policy's simulated and replayed figures side by side (summary.json `rows.<policy>`). "Stall" is a decode
    step's KV time: the modelled compute is left out of both sides. Replayed estimates {value, lo, hi, conf, n,
    reason} are t intervals over repetitions. A run from before a figure existed reads it as None."""
    STRICT = False  # nested: converted with the summary that holds it
    dc_accesses: float | None           # decode-critical reads in the trace (as simulated)
    dc_misses: float | None             # decode-critical reads that missed the fast tier (as simulated)
    dc_miss_ratio: float | None         # decode-critical misses per decode-critical read
    sim_p50_us: float | None            # simulated stall, median (us)
    sim_p99_us: float | None            # simulated stall, p99 (us)
    fit_p50_us: float | None            # simulated with tiers fitted to this host's medians, median stall (us)
    fit_p99_us: float | None            # the same, p99 (us)
    real_p50_us: float | None           # replayed stall, median over every repetition's steps (us)
    real_p99_us: float | None           # replayed stall, p99 over every repetition's steps (us)
    spills: float | None                # blocks written to the slow tier (as simulated and replayed)
    prefetches: float | None            # background reads admitted (as simulated and replayed)
    miss_read_p50_us: float | None      # median replayed O_DIRECT read of a missed block (us)
    hit_read_p50_us: float | None       # median replayed read of a fast-tier block (us)
    spill_write_p50_us: float | None    # median replayed synchronous spill write (us)
    waits_on_background: float | None   # replayed demand reads that waited for background I/O, all repetitions
    sim_stall_p99_us: float | None      # simulated stall p99 (us), the side-by-side column
    real_stall_p99_us: dict[str, Any] | None      # replayed stall p99, each repetition's p99 (estimate, us)
    p99_ratio_real_to_sim: dict[str, Any] | None  # replayed / simulated stall p99 (estimate)
    sim_slo: float | None               # simulated share of request-steps meeting their TPOT deadline
    real_slo: dict[str, Any] | None     # the same replayed, modelled compute added to each stall (estimate)
    step_us: float | None               # the modelled compute time of one decode step (us)
    real_stall_p99_by_rep_us: list[float] | None  # each repetition's replayed stall p99 (us), in run order

    @classmethod
    def of(cls, row: dict[str, Any]) -> "ReplayRow":
        """From replay.summary_row's figures: a figure the dataclass does not name fails here, when the run is
        written, not later in a reader."""
        return cls(**row)


@dataclass(frozen=True)
class ReplaySummary(StoredSummary):
    """`kvds policy replay`'s result (summary.json and `--json`)."""
    rows: dict[str, dict[str, Any]]                 # per policy: simulated and replayed figures side by side, key
    # by key in policy.replay.rows (ReplayRow)
    memcg: dict[str, Any]                           # the arena's memory cgroup: limit and peak bytes
    stall_p99_minus_lru: dict[str, dict[str, Any]]  # per policy: replayed stall p99 paired with LRU by repetition
    real_ci: dict[str, dict[str, Any]]              # per policy: bootstrap p50/p99 of replayed step latency (us)
    trace: str = ""                                 # the trace file replayed
    trace_counts: dict[str, int] | None = None      # its events by kind, decode-critical accesses, blocks, steps
    capacity: str = ""                              # the fast tier's size
    device: str = ""                                # the slow tier's loop device
    scheduler: str = ""                             # its I/O scheduler
    io_classes: dict[str, str] | None = None        # the ioprio of miss reads, spill writes and prefetch reads
    fitted_flags: str = ""                          # the --tier flags fitted to this host's medians
    priorities: str | None = None                   # who assigned priorities (a serving trace: kvds's rule, seed)


def _flat(groups: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(groups) if groups else np.zeros(0)


def run(cfg: ReplayConfig) -> Filed[ReplaySummary]:
    from kv_policy.replay import session as rp
    from kv_policy.replay.fit import as_flags

    io = rp.io_classes(cfg.mapping)
    trace = rp.truncate(load_trace(cfg.trace, seed=cfg.seed), cfg.max_steps)
    if not trace.critical.any():
        raise UserError(f"{cfg.trace.path}: the trace has no decode-critical accesses to measure")
    target = cfg.work_dir or work_dir()
    work = rp.plan_all(trace, cfg.policies, cfg.cap, cfg.fast, cfg.slow)
    st = rp.setup(work, target, cfg.scheduler)
    try:
        rp.run_replay(work, st, io, cfg.reps)
        memcg = rp.memcg_report(st)
    finally:
        st.arena.close()
        st.dev.close()
    ffast, fslow, refitted = rp.refit(work, trace, cfg.cap, cfg.fast, cfg.slow)
    rows = {name: ReplayRow.of(rp.summary_row(pr, refitted[name])).as_dict() for name, pr in work.items()}
    config = {"trace": cfg.trace.as_dict(), "trace_meta": trace.meta, "policies": cfg.policies,
              "capacity": cfg.cap.label(), "device": st.device_path, "scheduler": st.scheduler,
              "mapping": cfg.mapping, "reps": cfg.reps, "ioprio": {k: str(v) for k, v in io.__dict__.items()},
              "memcg": memcg, "fitted_tiers": {"fast": ffast.__dict__, "slow": fslow.__dict__}}
    filed = ResultStore().new_run("replay", config)
    cis = {}
    for name, pr in work.items():
        groups = [r.step_latency_us for r in pr.runs if r.step_latency_us.size]
        filed.write_samples(f"{name}-real-step-us", _flat(groups))
        filed.write_samples(f"{name}-sim-step-us", pr.sim.step_latency_us)
        cis[name] = bootstrap_percentiles(groups, (50.0, 99.0), n_boot=500) if groups else {}
    vs = {n: {k: e.as_dict() for k, e in d.items()} for n, d in rp.versus(rows).items()}
    summary = ReplaySummary(rows, memcg, vs,
                            {n: {str(q): e.as_dict() for q, e in c.items()} for n, c in cis.items()},
                            str(cfg.trace.resolved()), trace.counts(), cfg.cap.label(), st.device_path, st.scheduler,
                            {k: str(v) for k, v in io.__dict__.items()}, as_flags(ffast, fslow),
                            trace.meta.get("priorities"))
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
