"""The policy track's text output: one function per verb, from what its run module returned."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kv_policy.compare import render as grid
from kv_policy.compare import table, versus, versus_table
from kv_policy.metrics import fmt
from kv_policy.registry import is_reference
from harness.progress import say
from harness.stats import Estimate

if TYPE_CHECKING:
    from kv_policy.crosscheck_run import CrosscheckSummary
    from kv_policy.speed import SpeedSummary
    from kv_policy.compare_run import Comparison
    from kv_policy.goals_run import GoalsOutcome
    from kv_policy.replay_run import Replayed
    from kv_policy.sweep_run import Sweep
    from kv_policy.trace_run import TraceSummary


def compare(c: "Comparison", cap_label: str) -> None:
    print(f"{c.source}, {len(c.seeds)} seed(s), fast tier {cap_label}; mean ±95% CI half-width over seeds; "
          f"miss columns per access (hi/mid/low = priority bands), SLO = share of request-steps within TPOT")
    print(table(c.estimates))
    if c.versus:
        print()
        print(versus_table(c.versus))
    print(f"results: {c.run.path}")


def sweep(s: "Sweep") -> None:
    metric, fractions = s.summary.metric, list(s.estimates)
    policies = list(next(iter(s.estimates.values()))) if s.estimates else []
    print(f"{metric} on {s.source}, {len(s.seeds)} seed(s); columns: fast tier as a fraction of peak live KV; "
          f"mean ±95% CI half-width")
    rows = [[p + (" (offline bound)" if is_reference(p.split(":")[0]) else "")]
            + [fmt(s.estimates[f][p]) for f in fractions] for p in policies]
    print(grid(["policy"] + [f"{f:g}x" for f in fractions], rows))
    print(f"figure: {s.summary.png}")
    print(f"results: {s.run.path}")


def goals(o: "GoalsOutcome", tables: bool) -> None:
    from kv_policy import goals as g
    from kv_policy.compare import summarize

    if tables:
        for p, per in o.per_profile.items():
            print(f"profile {p}, seeds {','.join(map(str, o.seeds))}, fast tier {o.cap_label}; "
                  f"mean ±95% CI half-width")
            print(table(summarize(per)))
            print(versus_table(versus(per)))
            print()
    print(f"{len(o.seeds)} seeds, fast tier {o.cap_label}, prefetch and spills charged to the I/O budget; "
          f"verdicts from the whole 95% interval (paired over seeds against LRU)")
    print(grid(["profile", "policy", "verdict"],
               [[goal.profile, goal.policy + (" (offline bound: feasibility)" if goal.policy == g.PRIO_BOUND else ""),
                 str(v)] for goal, v in o.verdicts]))
    print(f"results: {o.run.path}")


def speed(out: "SpeedSummary") -> None:
    print(f"generated {out.events} events ({out.blocks} blocks, peak {out.peak_live_blocks} live) "
          f"in {out.generate_cpu_s:.2f} CPU s")
    print(f"{out.policy}: median {out.simulate_cpu_s:.2f} CPU s ({out.simulate_wall_s:.2f} s wall) over "
          f"{out.repeat} runs = {out.events_per_s:,.0f} events per CPU second on one core "
          f"(target {out.target_events_per_s:,}: {'met' if out.meets_target else 'MISSED'})")
    print("cost per event against peak live blocks (CPU time):")
    for row in out.scaling:
        print(f"  ~{row['peak_live_blocks']:>6} live blocks: {row['ns_per_event']:.0f} ns/event")
    speed_side_by_side(out)


def trace(t: "TraceSummary") -> None:
    say(f"wrote {t.path}")
    print(", ".join(f"{k} {v}" for k, v in {**t.counts, "peak_live_bytes": t.peak_live_bytes}.items()))


def replay(r: "Replayed") -> None:
    """The simulated-vs-replayed table, with the setup it ran on, then the paired differences against LRU."""
    rows, memcg, st, io = r.summary.rows, r.summary.memcg, r.setup, r.io
    counts = r.trace.counts()
    print(f"trace {r.trace_path}: {counts['steps']} steps, {counts['critical_access']} "
          f"decode-critical accesses, {r.trace.n_blocks} blocks; fast tier {r.cap_label}")
    print(f"slow tier {st.device_path} ({st.scheduler}); miss {io.critical_read}, spill {io.spill_write}, "
          f"prefetch {io.prefetch_read}; memcg limit {memcg.get('limit_bytes', 0) >> 20} MiB, "
          f"peak {int(memcg.get('max_usage_bytes', memcg.get('peak_bytes', 0))) >> 20} MiB")
    head = ["policy", "dc misses", "miss/access", "stall p99 ms: sim", "replayed [95% CI over reps]",
            "replayed/sim", "SLO met: sim", "replayed [95% CI]", "real p50 ms [95% CI]", "sim fit p50/p99 ms",
            "spills", "prefetches", "miss read / spill write p50 us"]
    body = []
    for name, row in rows.items():
        c = r.cis.get(name, {})
        body.append([name, f"{int(row['dc_misses'])}/{int(row['dc_accesses'])}", _num(row["dc_miss_ratio"], ".4f"),
                     _num(row["sim_stall_p99_us"] / 1e3), _est(row["real_stall_p99_us"], 1e-3),
                     _est(row["p99_ratio_real_to_sim"]), _num(row["sim_slo"], ".3f"), _est(row["real_slo"]),
                     _ci(c.get(50.0)), f"{_num(row['fit_p50_us'] / 1e3)} / {_num(row['fit_p99_us'] / 1e3)}",
                     f"{int(row['spills'])}", f"{int(row['prefetches'])}",
                     f"{_num(row['miss_read_p50_us'], '.0f')} / {_num(row['spill_write_p50_us'], '.0f')}"])
    print(grid(head, body))
    step_us = next(iter(rows.values()))["step_us"] if rows else 0.0
    print(f"stall = a decode step's KV time (replay executes its I/O and copies; the modelled recompute time of "
          f"recomputed blocks is added to replayed stalls); SLO adds the modelled compute of {step_us / 1e3:.2f} ms "
          f"per step and checks each request's TPOT deadline")
    for name, d in r.summary.stall_p99_minus_lru.items():
        print(f"{name} vs LRU, replayed stall p99 paired by repetition: difference {_est(d['difference_us'], 1e-3)} "
              f"ms, ratio {_est(d['ratio'])} (geometric mean, interval on logs)")
    print(f"fitted to this host's medians (sim fit columns): {r.fitted_flags}")
    print(f"results: {r.run.path}")


def _ci(est: Estimate | None) -> str:
    """A bootstrap estimate in ms; '-' without one, the bare value when the interval is undefined."""
    return _est(est.as_dict(), 1e-3) if est is not None else "-"


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


def crosscheck(s: "CrosscheckSummary") -> None:
    """`kvds policy crosscheck`: one row per algorithm and capacity, kvds beside libCacheSim."""
    print(f"{s.source}: {s.requests} requests, {s.unique_blocks} unique blocks; hit ratio per request, "
          f"capacity as a share of the unique blocks; libcachesim {s.libcachesim_version}")
    rows = [[r["algorithm"], f"{r['capacity_share']:g}", str(r["capacity_blocks"]), f"{r['kvds_hit_ratio']:.6f}",
             f"{r['libcachesim_hit_ratio']:.6f}", f"{r['difference']:.6f}",
             f"{r['kvds_requests_per_s']:,.0f}", f"{r['libcachesim_requests_per_s']:,.0f}"] for r in s.rows]
    print(grid(["algorithm", "capacity", "blocks", "kvds", "libCacheSim", "|diff|", "kvds req/s", "lcs req/s"],
               rows))
    print(f"{'agree' if s.agree else 'DISAGREE'}: every difference "
          f"{'within' if s.agree else 'not within'} {s.tolerance:g}")
    if s.engine_rows:
        print("offload variants libCacheSim does not run (kvds only): " + "; ".join(
            f"{r['algorithm']} at {r['capacity_share']:g}: {r['kvds_hit_ratio']:.6f}" for r in s.engine_rows))


def speed_side_by_side(out: "SpeedSummary") -> None:
    """`kvds policy speed`'s second table: kvds's policies on the trace beside libCacheSim on its block sequence."""
    if not out.side_by_side:
        return
    print(f"same trace, per CPU second: kvds events/s per policy; libCacheSim {out.libcachesim_version} requests/s "
          f"on its {out.sequence_requests} accessed blocks in order, cache {out.sequence_capacity_blocks} blocks")
    rows = [[r["policy"] + (" (compiled)" if r["compiled"] else ""), f"{r['events_per_s']:,.0f}",
             f"{r['target']:,}", "met" if r["meets_target"] else "MISSED"] for r in out.side_by_side]
    rows += [[f"libCacheSim {r['algorithm']}", f"{r['requests_per_s']:,.0f}", "-", f"hit ratio {r['hit_ratio']:.4f}"]
             for r in (out.libcachesim or [])]
    print(grid(["row", "per CPU s", "target", ""], rows))
