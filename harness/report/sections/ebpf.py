"""eBPF section: per-class block-layer latency histograms (from the I/O bench's recordings and from
`kvds ebpf record` runs) and reclaim latency histograms, straight from kernel tracepoints."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from harness.report import figures
from harness.report.context import ReportContext, Suite

_REP = re.compile(r"^ebpf-(?P<variant>.+)-rep(?P<rep>\d+)\.json$")


def _to_buckets(h: dict) -> dict[int, int]:
    return {slot: int(n) for slot, n in enumerate(h.get("buckets", [])) if n}


def _merge(into: dict[int, int], h: dict) -> None:
    for slot, n in _to_buckets(h).items():
        into[slot] = into.get(slot, 0) + n


def _blk_series(res: dict, kind: str = "issue_to_complete") -> dict[str, dict[int, int]]:
    """class/op -> merged log2 buckets over devices."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for dev, classes in (res.get("blk", {}).get(kind) or {}).items():
        for cls, ops in classes.items():
            for op, h in ops.items():
                if h.get("count"):
                    _merge(out[f"{cls} {op}"], h)
    return dict(out)


def _io_bench(ctx: ReportContext, suite: Suite) -> bool:
    run = suite.latest("io-bench")
    if run is None:
        return False
    per_variant: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for p in sorted(run.path.glob("ebpf-*-rep*.json")):
        m = _REP.match(p.name)
        if not m:
            continue
        res = json.loads(p.read_text())
        for label, b in _blk_series(res).items():
            for slot, n in b.items():
                per_variant[m["variant"]][label][slot] = per_variant[m["variant"]][label].get(slot, 0) + n
    if not per_variant:
        note = run.summary.get("ebpf_note")
        if note:
            ctx.doc.para(f"I/O bench {run.run_id}: no eBPF histograms ({note}).")
        return False
    rows = []
    for variant, series in per_variant.items():
        path = figures.log2_histogram(series, ctx.fig(f"ebpf-blk-{run.run_id}-{variant}.png"),
                                      f"Block-layer issue-to-complete latency by priority class ({variant})")
        ctx.doc.figure(path, f"I/O bench mode {variant}: block-layer latency per priority class and operation "
                             "(block:block_rq_issue -> block_rq_complete, all repetitions)")
        rows += [[variant, label, sum(b.values())] for label, b in sorted(series.items())]
    ctx.doc.table(["mode", "class / operation", "requests seen by the kernel"], rows)
    return True


def _records(ctx: ReportContext, suite: Suite) -> bool:
    shown = False
    for run in suite.of_kind("ebpf-record"):
        p = run.path / "ebpf.json"
        if not p.exists():
            continue
        res = json.loads(p.read_text())
        series = _blk_series(res)
        if series:
            path = figures.log2_histogram(series, ctx.fig(f"ebpf-rec-blk-{run.run_id}.png"),
                                          "Block-layer latency by priority class")
            ctx.doc.figure(path, f"kvds ebpf record {run.run_id}: block-layer latency per class")
            shown = True
        rc = res.get("reclaim", {}).get("latency", {})
        rseries = {k: _to_buckets(h) for k, h in rc.items() if h.get("count")}
        if rseries:
            path = figures.log2_histogram(rseries, ctx.fig(f"ebpf-rec-reclaim-{run.run_id}.png"),
                                          "Reclaim latency (direct and memcg)")
            ctx.doc.figure(path, f"kvds ebpf record {run.run_id}: reclaim latency")
            shown = True
    return shown


def render(ctx: ReportContext) -> None:
    if not any(s.of_kind("io-bench") or s.of_kind("ebpf-record") for s in ctx.suites):
        return
    ctx.doc.heading("Kernel-side view: eBPF tracepoint histograms")
    shown = False
    for suite in ctx.suites:
        shown |= _io_bench(ctx, suite)
        shown |= _records(ctx, suite)
    if not shown:
        ctx.doc.para("No eBPF histograms were recorded in these runs.")
