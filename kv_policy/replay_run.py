"""`kvds replay`: each policy's decisions executed as real memory reads and O_DIRECT I/O on this kernel, next to
the simulator's figures; filed as a `replay` run with every step's latency as raw samples."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.cli_args import require_root
from harness.errors import UserError
from harness.paths import work_dir
from kv_policy.compare import Capacity
from kv_policy.importers import load_trace
from kv_policy.tiers import Tier
from kv_policy.trace import Trace
from harness.results import ResultStore, Run, StoredSummary
from harness.stats import Estimate, bootstrap_percentiles

if TYPE_CHECKING:
    from kv_policy.replay import Setup
    from kv_policy.replay_exec import IoClasses


@dataclass(frozen=True)
class ReplayConfig:
    trace: str                # .npz (kvds), prototype JSONL, or request CSV/JSONL
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
class ReplaySummary:
    """summary.json of a `replay` run."""
    rows: dict[str, dict[str, Any]]                 # per policy: simulated and replayed figures side by side, key
    # by key in policy.replay.rows (ReplayRow)
    memcg: dict[str, Any]                           # the arena's memory cgroup: limit and peak bytes
    stall_p99_minus_lru: dict[str, dict[str, Any]]  # per policy: replayed stall p99 paired with LRU by repetition
    real_ci: dict[str, dict[str, Any]]              # per policy: bootstrap p50/p99 of replayed step latency (us)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "memcg": self.memcg, "stall_p99_minus_lru": self.stall_p99_minus_lru,
                "real_ci": self.real_ci}

    @classmethod
    def from_json(cls, stored: dict[str, Any]) -> "ReplaySummary":
        return cls(stored.get("rows", {}), stored.get("memcg", {}), stored.get("stall_p99_minus_lru", {}),
                   stored.get("real_ci", {}))


@dataclass
class Replayed:
    run: Run
    summary: ReplaySummary
    trace: Trace
    setup: "Setup"
    io: "IoClasses"
    cis: dict[str, dict[float, Estimate]]  # the bootstrap estimates behind real_ci
    fitted_flags: str                      # the tier flags fitted to this host's medians
    trace_path: str
    cap_label: str


def _flat(groups: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(groups) if groups else np.zeros(0)


def replay(cfg: ReplayConfig) -> Replayed:
    from kv_policy import replay as rp
    from kv_policy.replay_fit import as_flags

    io = rp.io_classes(cfg.mapping)
    trace = rp.truncate(load_trace(cfg.trace, seed=cfg.seed), cfg.max_steps)
    if not trace.critical.any():
        raise UserError(f"{cfg.trace}: the trace has no decode-critical accesses to measure")
    require_root("kvds replay")
    target = cfg.work_dir or work_dir()
    if cfg.work_dir is not None and not cfg.work_dir.is_dir():
        raise UserError(f"--work-dir {str(cfg.work_dir)!r} is not a directory")
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
    config = {"trace": str(cfg.trace), "trace_meta": trace.meta, "policies": cfg.policies,
              "capacity": cfg.cap.label(), "device": st.device_path, "scheduler": st.scheduler,
              "mapping": cfg.mapping, "reps": cfg.reps, "ioprio": {k: str(v) for k, v in io.__dict__.items()},
              "memcg": memcg, "fitted_tiers": {"fast": ffast.__dict__, "slow": fslow.__dict__}}
    run = ResultStore().new_run("replay", config)
    cis = {}
    for name, pr in work.items():
        groups = [r.step_latency_us for r in pr.runs if r.step_latency_us.size]
        run.write_samples(f"{name}-real-step-us", _flat(groups))
        run.write_samples(f"{name}-sim-step-us", pr.sim.step_latency_us)
        cis[name] = bootstrap_percentiles(groups, (50.0, 99.0), n_boot=500) if groups else {}
    vs = {n: {k: e.as_dict() for k, e in d.items()} for n, d in rp.versus(rows).items()}
    summary = ReplaySummary(rows, memcg, vs,
                            {n: {str(q): e.as_dict() for q, e in c.items()} for n, c in cis.items()})
    run.write_summary(summary.as_dict())
    return Replayed(run, summary, trace, st, io, cis, as_flags(ffast, fslow), str(cfg.trace), cfg.cap.label())
