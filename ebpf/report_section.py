"""The report's eBPF section (registered as `kvds.report_sections` 20-ebpf): per-class block-layer latency
histograms (from the I/O bench's recordings and from `kvds ebpf record` runs), reclaim latency histograms, how many
block requests each recording timed (RecordSummary.from_json: a renamed field fails here, not reads as missing),
and the probes' overhead goal re-judged from its stored run (overhead.summary_verdict). Headline figures and the
verdict line go to the Summary through ReportContext.headline / .verdict."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from harness.report import plots
from harness.report.context import ReportContext, Suite
from harness.results import Run

from ebpf.overhead import summary_verdict
from ebpf.recorder import iter_histograms
from ebpf.summary import OverheadSummary, RecordSummary

# (histogram prefix, figure file name, title, caption) of each figure a recording gets
RECORD_FIGURES = (("blk/issue_to_complete/", "blk", "Block-layer latency by priority class",
                   "block-layer latency per class"),
                  ("reclaim/", "reclaim", "Reclaim latency (direct and memcg)", "reclaim latency"))
OVERHEAD_GOAL = "eBPF probes' overhead"  # the goal's name in the Summary (as harness/report/sections/goals.py had it)
_REP = re.compile(r"^ebpf-(?P<variant>.+)-rep(?P<rep>\d+)\.json$")


def _to_buckets(h: dict) -> dict[int, int]:
    return {slot: int(n) for slot, n in enumerate(h.get("buckets", [])) if n}


def _series(res: dict[str, Any], prefix: str) -> dict[str, dict[int, int]]:
    """Histograms of a recording whose name starts with `prefix`, merged over devices: "class op" (blk) or kind
    (reclaim) -> log2 buckets. Names come from ebpf.recorder.iter_histograms (blk/KIND/DEV/CLASS/OP, reclaim/KIND)."""
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for name, h in iter_histograms(res):
        if not name.startswith(prefix):
            continue
        parts = name.split("/")
        label = f"{parts[3]} {parts[4]}" if parts[0] == "blk" else parts[1]
        for slot, n in _to_buckets(h).items():
            out[label][slot] = out[label].get(slot, 0) + n
    return dict(out)


def _io_bench(ctx: ReportContext, suite: Suite) -> bool:
    """The suite's newest I/O bench per device kind (this host's disk; the guest lab's model device, which `kvds run`
    benches too), each with its histograms or the reason it has none."""
    shown = False
    for run in suite.latest_by("io-bench", _device_kind).values():
        shown |= _io_bench_run(ctx, run)
    return shown


def _device_kind(run: Run) -> str:
    return str(((run.summary.get("config") or {}).get("device") or {}).get("kind"))


def _io_bench_run(ctx: ReportContext, run: Run) -> bool:
    per_variant: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for p in sorted(run.path.glob("ebpf-*-rep*.json")):
        m = _REP.match(p.name)
        if not m:
            continue
        for label, b in _series(json.loads(p.read_text()), "blk/issue_to_complete/").items():
            for slot, n in b.items():
                per_variant[m["variant"]][label][slot] = per_variant[m["variant"]][label].get(slot, 0) + n
    if not per_variant:
        note = run.summary.get("ebpf_note")
        if note:
            ctx.doc.para(f"I/O bench {run.run_id}: no eBPF histograms ({note}).")
        return False
    rows = []
    for variant, series in per_variant.items():
        path = plots.log2_histogram(series, ctx.fig(f"ebpf-blk-{run.run_id}-{variant}.png"),
                                      f"Block-layer issue-to-complete latency by priority class ({variant})")
        ctx.doc.figure(path, f"I/O bench mode {variant}: block-layer latency per priority class and operation "
                             "(block:block_rq_issue -> block_rq_complete, all repetitions)")
        rows += [[variant, label, sum(b.values())] for label, b in sorted(series.items())]
    ctx.doc.table(["mode", "class / operation", "requests timed by the probes"], rows)
    return True


def _records(ctx: ReportContext, suite: Suite) -> bool:
    shown = False
    rows = []
    for run in suite.of_kind("ebpf-record"):
        p = run.path / "ebpf.json"
        if not p.exists() or not (run.path / "summary.json").exists():
            continue
        s = RecordSummary.from_json(run.summary)
        res = json.loads(p.read_text())
        for prefix, name, title, what in RECORD_FIGURES:
            series = _series(res, prefix)
            if series:
                path = plots.log2_histogram(series, ctx.fig(f"ebpf-rec-{name}-{run.run_id}.png"), title)
                ctx.doc.figure(path, f"kvds ebpf record {run.run_id}: {what}")
                shown = True
        seen = s.requests()
        timed = "- (recorded before kvds accounted for requests)" if seen is None else f"{seen[0]} of {seen[1]}"
        rows.append([run.run_id, s.backend or "-", s.backend_detail or "", timed])
        if seen is not None:
            ctx.headline("eBPF record: block requests timed", suite.label, timed)
    if rows:
        ctx.doc.table(["recording", "backend", "block events hooked", "block requests timed"], rows)
        ctx.doc.para("A request that is not timed is still counted (ebpf.json, blk.accounting): unfinished when "
                     "its completion never reached the probes, untimed when its issue did not.")
    return shown or bool(rows)


def _overhead(ctx: ReportContext, suite: Suite) -> list[object] | None:
    """The overhead goal of the suite's newest `kvds ebpf overhead` run, judged by today's rule."""
    run = suite.latest("ebpf-overhead")
    if run is None:
        return None
    s = OverheadSummary.from_json(run.summary)
    v = summary_verdict(s)
    ctx.headline("eBPF probes: IOPS kept (with/without)", suite.label, str(v.estimate))
    ctx.verdict(suite.label, OVERHEAD_GOAL, str(v))
    return [suite.label, run.run_id, s.backend or "-", v.status, str(v)]


def render(ctx: ReportContext) -> None:
    kinds = ("io-bench", "ebpf-record", "ebpf-overhead")
    if not any(s.of_kind(k) for s in ctx.suites for k in kinds):
        return
    ctx.doc.heading("Kernel-side view: eBPF tracepoint histograms")
    shown = False
    for suite in ctx.suites:
        shown |= _io_bench(ctx, suite)
        shown |= _records(ctx, suite)
    overhead = [row for row in (_overhead(ctx, s) for s in ctx.suites) if row]
    if overhead:
        ctx.doc.table(["suite", "overhead run", "backend", "verdict", "evidence"], overhead)
        ctx.doc.para("The probes may cost at most 5% of a single-threaded O_DIRECT read loop's IOPS: met only when "
                     "the whole 95% interval of the paired with/without ratio's geometric mean is >= 0.95.")
    elif not shown:
        ctx.doc.para("No eBPF histograms were recorded in these runs.")
