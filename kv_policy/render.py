"""The policy track's text output: one function per verb, each from the verb's typed summary (harness/verbs.py).
Every estimate prints through harness.report.fmt: "value [lo, hi]", "(point estimate)" for one repetition, "-"
with its reason when missing."""
from __future__ import annotations

import sys

from harness.progress import say
from harness.report import fmt
from kv_policy.compare import render as grid
from kv_policy.compare import table, versus_table
from kv_policy.registry import is_reference
from kv_policy.compare_run import CompareSummary
from kv_policy.crosscheck_run import CrosscheckSummary
from kv_policy.gap_run import GapSummary
from kv_policy.generate_run import GenerateSummary
from kv_policy.goals_run import GoalsSummary
from kv_policy.import_run import ImportSummary
from kv_policy.replay_run import ReplaySummary
from kv_policy.speed import SpeedSummary
from kv_policy.sweep_run import SweepSummary


def _priorities(text: str | None) -> None:
    if text:
        print(text)


def compare(s: "CompareSummary") -> None:
    print(f"{s.source}, {len(s.seeds)} seed(s), fast tier {s.capacity}; mean [95% CI] over seeds; miss columns per "
          f"access (hi/mid/low = priority bands), SLO = share of request-steps within TPOT")
    _priorities(s.priorities)
    print(table(s.policies))
    if s.versus_lru:
        print()
        print(versus_table(s.versus_lru))


def sweep(s: "SweepSummary") -> None:
    fractions = list(s.by_fraction)
    print(f"{s.metric} on {s.source}, {len(s.seeds)} seed(s); columns: fast tier as a fraction of peak live KV; "
          f"mean [95% CI]")
    _priorities(s.priorities)
    rows = [[p + (" (offline bound)" if is_reference(p.split(":")[0]) else "")]
            + [fmt.estimate(s.by_fraction[f].get(p)) for f in fractions] for p in s.policies]
    print(grid(["policy"] + [f"{float(f):g}x" for f in fractions], rows))
    for f, verdicts in (s.versus_best_row or {}).items():
        print(f"{float(f):g}x: " + "; ".join(f"{v['status']}: {v['goal']} {fmt.estimate(v)}" for v in verdicts))
    print(f"figure: {s.png}")


def goals(s: "GoalsSummary") -> None:
    from kv_policy import goals as g

    if s.tables:
        for p, per in s.summary.items():
            print(f"{p}, seeds {','.join(map(str, s.seeds))}, fast tier {s.capacity}; mean [95% CI]")
            print(table(per))
            print(versus_table(s.versus_lru.get(p, {})))
            print()
    print(f"{s.source}; {len(s.seeds)} seeds, fast tier {s.capacity}, prefetch and spills charged to the I/O budget; "
          f"verdicts from the whole 95% interval (paired over seeds against LRU)")
    _priorities(s.priorities)
    print(grid(["profile", "policy", "verdict"],
               [[v["profile"], v["policy"] + (" (offline bound: feasibility)" if v["policy"] == g.PRIO_BOUND else ""),
                 f"{v['status']}: {v.get('goal', '')} {fmt.estimate(v)}"] for v in s.verdicts]))


def gap(s: "GapSummary") -> None:
    """Per feature an engine knows at a read: reads, misses of each row, and where the excess over MIN lies."""
    rows = list(s.dc_misses)
    print(f"{s.source}, {len(s.seeds)} seed(s), fast tier {s.capacity}; {s.dc_reads} decode-critical reads; "
          f"misses summed over seeds, excess share mean [95% CI] over seeds")
    _priorities(s.priorities)
    print("decode-critical misses per seed: " + ", ".join(f"{r} {fmt.estimate(s.dc_misses[r])}" for r in rows))
    print(f"share of {s.policy}'s excess over MIN on first heavy-hitter reads of prefix blocks: "
          f"{fmt.estimate(s.first_hh_prefix_share)}")
    for feature, classes in s.classes.items():
        print()
        print(grid([feature, "reads"] + [f"{r} misses" for r in rows] + [f"share of {s.policy} - MIN"],
                   [[label, str(c["reads"])] + [str(c[r]) for r in rows]
                    + [fmt.estimate(s.excess_share[feature][label])] for label, c in classes.items()]))


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


def generate(t: "GenerateSummary") -> None:
    say(f"wrote {t.path}")
    print(", ".join(f"{k} {v}" for k, v in {**t.counts, "peak_live_bytes": t.peak_live_bytes}.items()))


def import_(t: "ImportSummary") -> None:
    say(f"wrote {t.path} ({t.format}" + (f", {t.requests} requests)" if t.requests is not None else ")"))
    _priorities(t.priorities)
    print(", ".join(f"{k} {v}" for k, v in {**t.counts, "peak_live_bytes": t.peak_live_bytes}.items()))


setattr(sys.modules[__name__], "import", import_)  # render.import: `import` is a keyword, not a def name


def replay(s: "ReplaySummary") -> None:
    """The simulated-vs-replayed table, with the setup it ran on, then the paired differences against LRU."""
    counts, io, memcg = s.trace_counts or {}, s.io_classes or {}, s.memcg
    print(f"trace {s.trace}: {counts.get('steps')} steps, {counts.get('critical_access')} decode-critical accesses, "
          f"{counts.get('blocks')} blocks; fast tier {s.capacity}")
    _priorities(s.priorities)
    print(f"slow tier {s.device} ({s.scheduler}); miss {io.get('critical_read')}, spill {io.get('spill_write')}, "
          f"prefetch {io.get('prefetch_read')}; memcg limit {int(memcg.get('limit_bytes', 0)) >> 20} MiB, "
          f"peak {int(memcg.get('max_usage_bytes', memcg.get('peak_bytes', 0))) >> 20} MiB")
    head = ["policy", "dc misses", "miss/access", "stall p99 ms: sim", "replayed [95% CI over reps]",
            "replayed/sim", "SLO met: sim", "replayed [95% CI]", "real p50 ms [95% CI]", "sim fit p50/p99 ms",
            "spills", "prefetches", "miss read / spill write p50 us"]
    body = []
    for name, row in s.rows.items():
        ci50 = s.real_ci.get(name, {}).get("50.0")
        body.append([name, f"{fmt.number(row['dc_misses'], '.0f')}/{fmt.number(row['dc_accesses'], '.0f')}",
                     fmt.number(row["dc_miss_ratio"], ".4f"), fmt.number(_ms(row["sim_stall_p99_us"]), ".3g"),
                     fmt.estimate(row["real_stall_p99_us"], 1e-3), fmt.estimate(row["p99_ratio_real_to_sim"]),
                     fmt.number(row["sim_slo"], ".3f"), fmt.estimate(row["real_slo"]),
                     fmt.estimate(ci50, 1e-3) if ci50 else fmt.missing("no replayed steps"),
                     f"{fmt.number(_ms(row['fit_p50_us']), '.3g')} / {fmt.number(_ms(row['fit_p99_us']), '.3g')}",
                     fmt.number(row["spills"], ".0f"), fmt.number(row["prefetches"], ".0f"),
                     f"{fmt.number(row['miss_read_p50_us'], '.0f', why='no miss')} / "
                     f"{fmt.number(row['spill_write_p50_us'], '.0f', why='no spill')}"])
    print(grid(head, body))
    step_us = next(iter(s.rows.values()))["step_us"] if s.rows else 0.0
    print(f"stall = a decode step's KV time (replay executes its I/O and copies; the modelled recompute time of "
          f"recomputed blocks is added to replayed stalls); SLO adds the modelled compute of {step_us / 1e3:.2f} ms "
          f"per step and checks each request's TPOT deadline")
    for name, d in s.stall_p99_minus_lru.items():
        print(f"{name} vs LRU, replayed stall p99 paired by repetition: difference "
              f"{fmt.estimate(d.get('difference_us'), 1e-3)} ms, ratio {fmt.estimate(d.get('ratio'))} "
              f"(geometric mean, interval on logs)")
    print(f"fitted to this host's medians (sim fit columns): {s.fitted_flags}")


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1e3


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
