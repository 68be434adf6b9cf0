"""Goals judged outside the I/O sweep: fio-check (kvds's reader within +-10% of fio's), the eBPF probes'
overhead, and the edit -> validated kernel time. Each verdict is re-judged here from the estimate the run stored,
with harness.stats' one rule, so a run recorded under an older rule is shown by today's."""

from __future__ import annotations

import math

from harness import stats
from harness.report.context import ReportContext, Suite


def _est(d: dict | None) -> stats.Estimate:
    def num(x: object) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan

    d = d or {}
    return stats.Estimate(num(d.get("value")), num(d.get("lo")), num(d.get("hi")), d.get("conf", 0.95),
                          d.get("reason", ""))


def fio_verdict(s: dict) -> stats.Verdict:
    from io_priority.fio import summary_verdict  # closed loop: p50; open loop (--rate N): p50 and p99

    return summary_verdict(s)


def overhead_verdict(s: dict) -> stats.Verdict:
    from ebpf.overhead import verdict

    if s.get("ratio_geomean"):
        return verdict(_est(s["ratio_geomean"]))
    from ebpf.overhead import paired_ratio  # a run from before the geometric mean: recompute from its IOPS

    wo, wi = s.get("iops_without") or [], s.get("iops_with") or []
    return verdict(paired_ratio([b / a for a, b in zip(wo, wi) if a]))


def rebuild_verdict(s: dict) -> stats.Verdict:
    from qemu_validation.rebuild_bench import verdict

    return verdict(s.get("reps") or [])


SITES = (("io-fio-check", "fio-check: kvds's unloaded reader against fio", fio_verdict),
         ("ebpf-overhead", "eBPF probes' overhead", overhead_verdict),
         ("qemu-bench", "edit -> rebuild -> boot -> validate", rebuild_verdict))


def _rows(suite: Suite) -> list[list[str]]:
    rows = []
    for kind, title, judge in SITES:
        run = suite.latest(kind)
        if run is None:
            continue
        v = judge(run.summary)
        rows.append([title, run.run_id, v.status, str(v)])
    return rows


def render(ctx: ReportContext) -> None:
    per_suite = [(s, _rows(s)) for s in ctx.suites]
    if not any(rows for _, rows in per_suite):
        return
    ctx.doc.heading("Other goals")
    ctx.doc.para("Met only when the whole 95% interval is on the goal's side, missed when the whole interval is on "
                 "the other side, inconclusive otherwise (a failed validation is never met).")
    for suite, rows in per_suite:
        if not rows:
            continue
        if len(ctx.suites) > 1:
            ctx.doc.para(f"Suite {suite.label}:")
        ctx.doc.table(["goal", "run", "verdict", "evidence"], rows)
        for title, _, status, text in rows:
            ctx.verdict(suite.label, title, text)
