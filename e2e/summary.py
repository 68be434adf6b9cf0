"""`kvds e2e`'s typed results (summary.json and `--json`), registered as `kvds.summaries` e2e, e2e.cells,
e2e-dry-run and documented key by key in docs/results.md."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import StoredSummary

SCHEMA = "kvds.e2e/1"
PLAN_SCHEMA = "kvds.e2e-plan/1"


@dataclass(frozen=True)
class CellFigures(StoredSummary):
    """One cell of the factorial table (summary.json `cells.<cell>`). Estimates are {value, lo, hi, conf, n,
    reason}: TPOT percentiles resample repetitions (harness.stats.bootstrap_percentiles), the rest are t intervals
    over repetitions; fewer than 3 repetitions give point estimates. TPOT = replayed KV stall + modelled compute +
    modelled recompute of the step (us)."""
    STRICT = False
    policy: str                                 # the cell's policy
    intents: bool                               # the intent mapping applied (False: mapping none)
    reps: int                                   # repetitions run
    tpot_p50_us: dict[str, Any] | None          # TPOT median (us), interval resampling repetitions
    tpot_p99_us: dict[str, Any] | None          # TPOT p99 (us), the same
    slo_high: dict[str, Any]                    # high-priority request-steps within their TPOT deadline (share)
    slo: dict[str, Any]                         # every request-step
    goodput_tok_s: dict[str, Any]               # tokens that met their deadline per second of TPOT
    prefill_tokens_recomputed: float | None     # the plan's recomputes x the block's tokens
    slow_tier_bytes: dict[str, Any]             # bytes read + written on the slow tier's device (all tenants)
    replay_slow_bytes: int                      # of which the plan's misses, prefetches and spills
    tenant_write_bytes: dict[str, Any]          # the spill tenant's bytes (device writes minus the plan's spills)
    swap_ins: dict[str, Any]                    # major faults of kvds: the arena's reclaimed pages read back
    memcg_failcnt: dict[str, Any]               # times the squeezed cgroup hit its limit
    madvised_blocks: float | None               # blocks given madvise advice per repetition
    mm_intent: dict[str, Any] | None            # mm_intent registrations (intent cells on a kernel with the
    # registry): re-registrations per repetition, most ranges held, ranges dropped, left after clear, reclaim stats
    seconds: dict[str, Any]                     # wall time of one repetition
    sim_tpot_p50_us: float | None               # the simulator's prediction for the cell's policy
    sim_tpot_p99_us: float | None               # the simulator's TPOT p99 (us)
    sim_slo_high: float | None                  # the simulator's high-priority SLO attainment
    sim_goodput_tok_s: float | None             # the simulator's goodput
    measured_to_sim_p99: dict[str, Any]         # measured / simulated TPOT p99 (geometric mean over repetitions)
    per_rep: list[dict[str, float]]             # each repetition's p50_us, p99_us, slo, slo_high, goodput
    missing_cost: dict[str, Any] | None = None  # when the ratio is outside [0.5, 2]: the measured excess per
    # modelled op (us per step), swap-ins and waits on background I/O; `largest` names it
    calibrated_sim_tpot_p99_us: float | None = None  # the simulator rerun with each modelled op's cost set to the
    # median this cell measured (e2e.figures.calibrated_tiers): the model's prediction on the device as it was
    calibrated_op_us: dict[str, float] | None = None  # the op costs (us per block) that rerun used
    measured_to_calibrated_sim_p99: dict[str, Any] | None = None  # measured / calibrated TPOT p99 (geometric mean)
    calibrated_mean_sim_tpot_p99_us: float | None = None  # the same rerun with each op priced at its measured mean
    # (the tail's weight included: a mean cost is what a one-cost-per-op model can carry of the queueing)
    calibrated_mean_op_us: dict[str, float] | None = None  # the op costs (us per block) that rerun used
    measured_to_calibrated_mean_sim_p99: dict[str, Any] | None = None  # measured / that prediction's TPOT p99
    swap_in_term_us_per_step: float | None = None  # the simulator's missing swap-in cost: swap-ins per step x one
    # swap-in's measured cost (e2e.swapin_cost; setup.swap_in_cost)
    sim_swap_in_tpot_p99_us: float | None = None  # the simulated TPOT p99 with that term
    measured_to_sim_swap_in_p99: dict[str, Any] | None = None  # measured / that prediction (geometric mean)
    stalls: dict[str, Any] | None = None        # where the steps' time went, measured per decode step
    # (e2e/step_stalls.py, taskstats): `per_step_us` (reclaim, swapin, blkio us; guard_waits count) on average,
    # `at_p99_steps` the same over each repetition's steps at or above its TPOT p99 (with their mean `tpot`, the
    # slowest step `tpot_max`, the guard's measured response `guard`, and `rest_us`: TPOT less compute and every
    # stall), the guard's median response; `reason` alone when not measured
    sim_memory_tpot_p99_us: float | None = None  # the simulation with each step's measured memory stalls added
    # (reclaim + swap-in + guard waits x response): its TPOT p99, averaged over repetitions
    measured_to_sim_memory_p99: dict[str, Any] | None = None  # measured / that prediction (geometric mean)
    refaults: dict[str, Any] | None = None      # anonymous pages of the squeezed group read back after reclaim took
    # them (memory.stat workingset_refault_anon), per repetition
    squeeze_per_rep: list[dict[str, Any]] | None = None  # each repetition's squeeze at work (e2e.figures.squeeze_row):
    # swap-ins, refaults, pages scanned / reclaimed (v2 pgscan / pgsteal; v1 pgpgout), limit hits, and where the
    # group's pages were when its limit was set and at the repetition's end (anon, file, swap, charge bytes)


@dataclass(frozen=True)
class E2eSummary(StoredSummary):
    """`kvds e2e`'s result."""
    schema: str                                 # "kvds.e2e/1"
    cells: dict[str, dict[str, Any]]            # cell name -> CellFigures (e2e.cells)
    effects: dict[str, dict[str, Any]]          # metric -> policy / mechanisms / interaction / whole_stack estimates
    goals: dict[str, dict[str, Any]]            # goal -> verdict (status, goal, value, lo, hi, line)
    order: list[list[Any]]                      # [[rep, cell], ...] as run
    trace: dict[str, Any]                       # the slice: path, steps, events, block sizes, priorities' origin
    setup: dict[str, Any]                       # device, scheduler, swap, memory limit, squeeze, mapping knobs
    tenants: dict[str, Any]                     # stated intensity and the hog's measured one
    load: dict[str, Any]                        # host load average before and after, the other kvds processes
    seconds: float = 0.0                        # wall time of the whole run
    warmup: list[dict[str, Any]] = field(default_factory=list)  # the unmeasured warm-up repetitions' squeeze rows
    # (e2e.figures.squeeze_row, with their cell): in no figure


@dataclass(frozen=True)
class E2ePlan(StoredSummary):
    """`kvds e2e --dry-run`: what a run would do; nothing is set up, started or filed."""
    schema: str                                 # "kvds.e2e-plan/1"
    cells: list[str]                            # the four cells, reference first
    order: list[list[Any]]                      # [[rep, cell], ...] as a run would go
    trace: dict[str, Any]                       # the slice: path, steps, events, block sizes, priorities' origin
    sizes: dict[str, Any]                       # slot, arena, slow tier, spill region, squeeze (bytes)
    mapping: dict[str, Any]                     # the intent mapping's knobs per class
    madvise_per_rep: dict[str, dict[str, int]]  # per policy: blocks per advice in one intent repetition
    tenants: dict[str, Any]                     # the stated intensity
    commands: list[dict[str, Any]] = field(default_factory=list)  # every command underneath, in order
    warmup: int = 0                             # unmeasured repetitions of the reference cell first
    guest_timeout_s: float | None = None        # what `--target guest` allows this plan (e2e.e2e_run.guest_seconds,
    # at least harness.remote.guest.GUEST_TIMEOUT_S; --guest-timeout overrides)
