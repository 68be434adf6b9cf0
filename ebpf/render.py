"""Text output of the two benches of the ebpf track, from their typed summaries: `kvds ebpf overhead` (the probes'
cost, the goal's verdict) and `kvds ebpf load-time` (load-and-attach seconds per probe set and backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ebpf.loadtime import LoadTimeSummary
    from ebpf.overhead import OverheadSummary


def format_overhead(s: "OverheadSummary", run_path: str) -> str:
    """`kvds ebpf overhead`'s table: IOPS per variant, the paired ratios, the verdict, and what the programs saw."""
    from harness import stats

    g = s.ratio_geomean
    geo = stats.Estimate(*(float("nan") if g.get(k) is None else float(g[k]) for k in ("value", "lo", "hi")))
    ci = s.ratio_ci95
    has_ci = None not in ci and all(x == x for x in ci)
    lines = [
        f"O_DIRECT {s.block_bytes // 1024} KiB random reads, 1 thread, {s.device} "
        f"(loop, scheduler {s.scheduler}), {s.reps} x {s.seconds:g} s per variant, ABBA order",
        f"  without probes: IOPS {s.iops_without} (median {s.median_iops_without})",
        f"  with {','.join(s.probes)} ({s.backend} backend): IOPS {s.iops_with} (median {s.median_iops_with})",
        f"  with/without (mean of paired ratios): {s.ratio_mean} "
        + (f"95% CI {ci}" if has_ci else f"(point estimate: {s.reps} repetitions < {stats.MIN_REPS}, no interval)")
        + f" -> loss {s.loss_pct}%",
        f"  geometric mean of the paired ratios (what the goal is judged on): {geo}",
        f"  verdict: {s.goal_text}",
        f"  load+attach per 'with' run (s): {s.load_attach_s}",
        f"  reads issued vs counted in the histograms: {s.reads_vs_histogram_counts}",
        f"  program runs skipped by the kernel per 'with' run (all devices): {s.missed_events_per_run}",
        f"  reads whose completion never reached the programs per 'with' run: {s.unfinished_per_run}",
    ]
    if s.program_stats is not None:
        lines.append(f"  inside the programs (kernel.bpf_stats_enabled): {s.program_ns_per_read} ns per read")
        lines += [f"    {tp:32s} {v['runs_per_read']:.2f} runs/read  {v['ns_per_run']:8.1f} ns/run  "
                  f"{v['ns_per_read']:8.1f} ns/read" for tp, v in s.program_stats.items()]
    lines += [f"  load average at the end: {s.loadavg}", f"  run: {run_path}"]
    return "\n".join(lines)


def format_load_times(s: "LoadTimeSummary", run_path: str) -> str:
    """`kvds ebpf load-time`'s table: load-and-attach seconds per probe set and backend."""
    lines = [f"load+attach per recording (s), {s.runs} runs per probe set, ABBA order; "
             f"load average {s.loadavg_before} -> {s.loadavg_after} on {s.cpus} CPUs"]
    c = s.compile_s
    lines.append(f"  BPF object: {'compiled now in %.2f s (first use)' % c if c else 'cached (compiled at set-up)'}")
    for key, t in s.load_attach.items():
        lines.append(f"  {key:<20} median {t['median_s']:.3f}  min {t['min_s']:.3f}  "
                     f"max {t['max_s']:.3f}  runs {t['runs_s']}")
    lines.append(f"  run: {run_path}")
    return "\n".join(lines)
