"""The report's delivery section (registered as `kvds.report_sections` 60-net): per suite, the newest net-bench
run's fetch latency, interference and bulk throughput per variant, the goal's verdicts and the anchor, read from
its typed summary (BenchSummary) so a renamed key fails here rather than reading as missing."""

from __future__ import annotations

import shutil

from net_priority.bench_run import FIGURE
from net_priority.summary import BenchSummary, VariantFigures
from harness.report.context import ReportContext
from harness.report.fmt import estimate
from harness.stats import verdict_from_dict


def render(ctx: ReportContext) -> None:
    runs = ctx.latest("net-bench")
    if not runs:
        return
    ctx.doc.heading("KV delivery: decode-critical fetches under bulk transfer")
    ctx.doc.para("Fetch latency from the intended issue time (open loop, one fetch per decode step); p99 / unloaded "
                 "paired by repetition; bulk throughput while fetching; 95% intervals over repetitions.")
    rows = []
    for suite, run in runs:
        s = BenchSummary.from_json(run.summary)
        cfg = s.config
        for name, raw in s.variants.items():
            v = VariantFigures.from_json(raw)
            g = v.goal or {}
            rows.append([suite.label, f"{cfg['qdisc']} {cfg['rate_mbit']:g}", name, v.fetches,
                         estimate(v.latency_us.get("p50")), estimate(v.latency_us.get("p99")),
                         estimate(v.interference_p99_network or v.interference_p99), estimate(v.bulk_mbit),
                         estimate(v.bulk_share), g.get("status", "-")])
            if g:
                line = "; ".join(verdict_from_dict(p) for p in g["parts"])
                ctx.verdict(suite.label, f"net {name}: fetch p99 <= 1.5 x unloaded, bulk >= 80%",
                            f"{g['status']}: {line}")
                ctx.headline(f"net {name} fetch p99 / unloaded", suite.label,
                             (v.interference_p99 or {}).get("value"))
        ctx.summary.setdefault("net", {})[suite.label] = {"run": run.run_id, "variants": s.variants}
        if s.anchor:
            for size, d in s.anchor["pingpong"].items():
                ctx.verdict(suite.label, f"net anchor {size} B", d["text"])
    ctx.doc.table(["suite", "bottleneck", "variant", "fetches", "p50 us", "p99 us", "p99 / unloaded (goal clock)",
                   "bulk Mbit/s",
                   "bulk / rate", "goal"], rows)
    for suite, run in runs:
        png = run.path / FIGURE
        if png.exists():
            dest = ctx.fig(f"net-latency-{run.run_id}.png")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, dest)
            ctx.doc.figure(dest, f"{suite.label}: fetch latency CDF per variant (run {run.run_id})")
