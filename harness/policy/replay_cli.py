"""`kvds replay --trace T --policy P`: simulated vs real-kernel decode-step latency, per policy."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.cli_args import add_json_flag, positive_int, require_root
from harness.errors import UserError
from harness.paths import work_dir
from harness.policy import options
from harness.policy.compare import render
from harness.policy.importers import load_trace
from harness.policy.registry import parse_policies
from harness.results import ResultStore
from harness.policy.replay_fit import as_flags
from harness.policy.trace import Trace
from harness.stats import Estimate, bootstrap_percentiles
from harness.results import dumps as strict_dumps

if TYPE_CHECKING:
    from harness.policy.replay import Setup
    from harness.policy.replay_exec import IoClasses


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="execute policies' decisions as real memory and O_DIRECT I/O; "
                                      "simulated vs measured latency")
    p.add_argument("--trace", required=True, help=".npz (kvds), prototype JSONL, or request CSV/JSONL")
    p.add_argument("--policy", default="all", help="policy, comma list, or 'all'")
    options.add_tier_args(p)
    p.add_argument("--work-dir", type=Path, help=f"directory for the loop device's backing file "
                                               f"(default {work_dir()})")
    p.add_argument("--mapping", default="intent", help="intent->mechanism mapping supplying the ioprio classes")
    p.add_argument("--scheduler", default="mq-deadline",
                   help="I/O scheduler for the kvds loop device ('keep' leaves it unchanged)")
    p.add_argument("--reps", type=positive_int, default=1, help="replays per policy (alternating order)")
    p.add_argument("--max-steps", type=positive_int, help="replay only the first N steps of the trace")
    p.add_argument("--seed", type=int, default=0, help="batching seed when --trace is a request trace")
    add_json_flag(p)
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from harness.policy import replay

    policies = parse_policies(args.policy)
    fast, slow, cap, _ = options.tiers_from_args(args)
    io = replay.io_classes(args.mapping)
    trace = replay.truncate(load_trace(args.trace, seed=args.seed), args.max_steps)
    if not trace.critical.any():
        raise UserError(f"{args.trace}: the trace has no decode-critical accesses to measure")
    require_root("kvds replay")
    target = args.work_dir or work_dir()
    if args.work_dir is not None and not args.work_dir.is_dir():
        raise UserError(f"--work-dir {str(args.work_dir)!r} is not a directory")
    work = replay.plan_all(trace, policies, cap, fast, slow)
    st = replay.setup(work, target, args.scheduler)
    try:
        replay.run_replay(work, st, io, args.reps)
        memcg = replay.memcg_report(st)
    finally:
        st.arena.close()
        st.dev.close()
    ffast, fslow, refitted = replay.refit(work, trace, cap, fast, slow)
    rows = {name: replay.summary_row(pr, refitted[name]) for name, pr in work.items()}
    config = {"trace": str(args.trace), "trace_meta": trace.meta, "policies": policies, "capacity": cap.label(),
              "device": st.device_path, "scheduler": st.scheduler, "mapping": args.mapping, "reps": args.reps,
              "ioprio": {k: str(v) for k, v in io.__dict__.items()}, "memcg": memcg,
              "fitted_tiers": {"fast": ffast.__dict__, "slow": fslow.__dict__}}
    run = ResultStore().new_run("replay", config)
    cis = {}
    for name, pr in work.items():
        groups = [r.step_latency_us for r in pr.runs if r.step_latency_us.size]
        run.write_samples(f"{name}-real-step-us", _flat(groups))
        run.write_samples(f"{name}-sim-step-us", pr.sim.step_latency_us)
        cis[name] = bootstrap_percentiles(groups, (50.0, 99.0), n_boot=500) if groups else {}
    vs = {n: {k: e.as_dict() for k, e in d.items()} for n, d in replay.versus(rows).items()}
    run.write_summary({"rows": rows, "memcg": memcg, "stall_p99_minus_lru": vs,
                       "real_ci": {n: {str(q): e.as_dict() for q, e in c.items()} for n, c in cis.items()}})
    if args.json:
        print(strict_dumps({"run": str(run.path), "rows": rows, "memcg": memcg, "stall_p99_minus_lru": vs},
                           indent=2))
        return 0
    _print_table(args, trace, st, io, rows, cis, memcg, cap.label())
    for name, d in vs.items():
        print(f"{name} vs LRU, replayed stall p99 paired by repetition: difference {_est(d['difference_us'], 1e-3)} "
              f"ms, ratio {_est(d['ratio'])} (geometric mean, interval on logs)")
    print(f"fitted to this host's medians (sim fit columns): {as_flags(ffast, fslow)}")
    print(f"results: {run.path}")
    return 0


def _flat(groups: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(groups) if groups else np.zeros(0)


def _ci(est: Estimate | None) -> str:
    """A bootstrap estimate in ms; '-' without one, the bare value when the interval is undefined."""
    return _est(est.as_dict(), 1e-3) if est is not None else "-"


def _print_table(args: argparse.Namespace, trace: Trace, st: "Setup", io: "IoClasses",
                 rows: dict[str, dict[str, float]], cis: dict[str, dict[float, Estimate]],
                 memcg: dict[str, int | str], cap_label: str) -> None:
    """The simulated-vs-replayed table, with the setup it ran on."""
    counts = trace.counts()
    print(f"trace {args.trace}: {counts['steps']} steps, {counts['critical_access']} decode-critical accesses, "
          f"{trace.n_blocks} blocks; fast tier {cap_label}")
    print(f"slow tier {st.device_path} ({st.scheduler}); miss {io.critical_read}, spill {io.spill_write}, "
          f"prefetch {io.prefetch_read}; memcg limit {memcg.get('limit_bytes', 0) >> 20} MiB, "
          f"peak {int(memcg.get('max_usage_bytes', memcg.get('peak_bytes', 0))) >> 20} MiB")
    head = ["policy", "dc misses", "miss/access", "stall p99 ms: sim", "replayed [95% CI over reps]",
            "replayed/sim", "SLO met: sim", "replayed [95% CI]", "real p50 ms [95% CI]", "sim fit p50/p99 ms",
            "spills", "prefetches", "miss read / spill write p50 us"]
    body = []
    for name, r in rows.items():
        c = cis.get(name, {})
        body.append([name, f"{int(r['dc_misses'])}/{int(r['dc_accesses'])}", _num(r["dc_miss_ratio"], ".4f"),
                     _num(r["sim_stall_p99_us"] / 1e3), _est(r["real_stall_p99_us"], 1e-3),
                     _est(r["p99_ratio_real_to_sim"]), _num(r["sim_slo"], ".3f"), _est(r["real_slo"]),
                     _ci(c.get(50.0)), f"{_num(r['fit_p50_us'] / 1e3)} / {_num(r['fit_p99_us'] / 1e3)}",
                     f"{int(r['spills'])}", f"{int(r['prefetches'])}",
                     f"{_num(r['miss_read_p50_us'], '.0f')} / {_num(r['spill_write_p50_us'], '.0f')}"])
    print(render(head, body))
    step_us = next(iter(rows.values()))["step_us"] if rows else 0.0
    print(f"stall = a decode step's KV time (replay executes its I/O and copies; the modelled recompute time of "
          f"recomputed blocks is added to replayed stalls); SLO adds the modelled compute of {step_us / 1e3:.2f} ms "
          f"per step and checks each request's TPOT deadline")


def _num(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None or v != v else f"{v:{spec}}"


def _est(d: dict | None, scale: float = 1.0) -> str:
    """'v [lo, hi]' from an Estimate dict; '-' when absent, the bare value with fewer than 2 repetitions."""
    if not d or d.get("value") is None or d["value"] != d["value"]:
        return "-"
    v, lo, hi = d["value"] * scale, d.get("lo"), d.get("hi")
    if lo is None or hi is None or lo != lo or hi != hi:
        return f"{v:.3g} (1 rep: no CI)"
    return f"{v:.3g} [{lo * scale:.3g}, {hi * scale:.3g}]"
