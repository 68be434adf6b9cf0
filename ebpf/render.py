"""Text output of the ebpf track's verbs, each from its typed summary (harness/verbs.py): `kvds ebpf record` (the
histograms biolatency-style), `overhead` (the probes' cost and the goal's verdict) and `load-time`. Intervals and
missing figures print through harness/report/fmt, as everywhere in kvds."""

from __future__ import annotations

from harness.report import fmt

from ebpf.summary import LoadTimeSummary, OverheadSummary, RecordSummary


def record(s: RecordSummary) -> None:
    """The recording's histograms and counts, then the loader, its load time and the plots written."""
    from ebpf.report import format_results

    if s.results is not None:
        print(format_results(s.results))
    detail = f" ({s.backend_detail})" if s.backend_detail else ""
    print(f"\nbackend {s.backend}{detail}, load+attach {fmt.number(s.load_attach_s, '.4f', ' s')}")
    print(f"{s.plots or 0} PNG{'s' if s.plots != 1 else ''} (one per histogram)")
    if s.command_status:
        print(f"command exited with status {s.command_status}")


def overhead(s: OverheadSummary) -> None:
    """IOPS per variant, the paired ratios, the verdict, and what the programs saw."""
    ci = s.ratio_ci95 or [None, None]
    mean = {"value": s.ratio_mean, "lo": ci[0], "hi": ci[1]}
    lines = [
        f"O_DIRECT {s.block_bytes // 1024} KiB random reads, 1 thread, {s.device} "
        f"(loop, scheduler {s.scheduler}), {s.reps} x {s.seconds:g} s per variant, ABBA order",
        f"  without probes: IOPS {s.iops_without} (median {s.median_iops_without})",
        f"  with {','.join(s.probes)} ({s.backend}): IOPS {s.iops_with} (median {s.median_iops_with})",
        f"  with/without (mean of paired ratios, 95% interval): {fmt.estimate(mean)} "
        f"-> loss {fmt.number(s.loss_pct, '.2f', '%')}",
        f"  geometric mean of the paired ratios (what the goal is judged on): {fmt.estimate(s.ratio_geomean)}",
        f"  verdict: {s.goal_text}",
        f"  load+attach per 'with' run (s): {s.load_attach_s}",
        f"  reads issued vs counted in the histograms: {s.reads_vs_histogram_counts}",
        f"  program runs skipped by the kernel per 'with' run (all devices): {s.missed_events_per_run}",
        f"  reads whose completion never reached the programs per 'with' run: {s.unfinished_per_run}",
    ]
    if s.program_stats is not None:
        lines.append(f"  inside the programs (kernel.bpf_stats_enabled): "
                     f"{fmt.number(s.program_ns_per_read, '.1f', ' ns')} per read")
        lines += [f"    {tp:32s} {v['runs_per_read']:.2f} runs/read  {v['ns_per_run']:8.1f} ns/run  "
                  f"{v['ns_per_read']:8.1f} ns/read" for tp, v in s.program_stats.items()]
    lines.append(f"  load average at the end: {s.loadavg}")
    print("\n".join(lines))


def load_time(s: LoadTimeSummary) -> None:
    """Load-and-attach seconds per probe set."""
    lines = [f"load+attach per recording (s), {s.runs} runs per probe set, ABBA order; "
             f"load average {s.loadavg_before} -> {s.loadavg_after} on {s.cpus} CPUs"]
    c = s.compile_s
    lines.append(f"  BPF object: {'compiled now in %.2f s (first use)' % c if c else 'cached (compiled at set-up)'}")
    for key, t in s.load_attach.items():
        lines.append(f"  {key:<20} median {t['median_s']:.3f}  min {t['min_s']:.3f}  "
                     f"max {t['max_s']:.3f}  runs {t['runs_s']}")
    print("\n".join(lines))
