"""The VM track's typed summary (kernel_vm/summary.py) and its report section, from synthetic repetitions.

No kernel is needed for what is tested here: the arithmetic of the summary, its one conversion to strict JSON,
and that runs stored before schema kvds.vm-bench/2 still load and render (tests/vm/test_vm_kernel.py runs the real
bench). The repetitions are fabricated on purpose: a variant whose squeeze took nothing has no cold share (NaN),
which a real run on this host produces only by chance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.report.context import ReportContext, Suite
from harness.report.document import Document
from harness.results import ResultStore, Run
from kernel_vm import report_section
from kernel_vm.mix import CLASSES
from kernel_vm.repetition import RepFacts, RepResult
from kernel_vm.summary import SCHEMA, BenchSummary, comparison, headline, mm_intent_doc, summarize_variant
from tests.core.test_json_shape import strict_loads

N = len(CLASSES)


def _rep(seed: int, swapped: list[int], slow: float = 1.0) -> RepResult:
    rng = np.random.default_rng(seed)
    pages = 400
    lat = {c.value: (slow * 1000 * rng.lognormal(0, 0.3, pages)).astype(np.int64) for c in CLASSES}
    resident = [pages - s for s in swapped]
    return RepResult(latency_ns=lat, faults={c.value: {"major": s, "minor": 1} for c, s in zip(CLASSES, swapped)},
                     residency={"after_apply": {"resident": [pages] * N, "swapped": [0] * N, "absent": [0] * N},
                                "after_pressure": {"resident": resident, "swapped": swapped, "absent": [0] * N}},
                     facts=RepFacts(memcg_version=1, squeeze_limit_bytes=1 << 20, limit_error=None))


def _summary() -> BenchSummary:
    reps = {"none": [_rep(r, [40, 10, 30, 30, 20, 5], 30.0) for r in range(3)],
            "memcg-protect": [_rep(10 + r, [0, 10, 30, 30, 20, 5]) for r in range(3)],
            "mm-intent": [_rep(20 + r, [0] * N) for r in range(3)]}  # the squeeze took nothing: no cold share
    per = {n: summarize_variant(r) for n, r in reps.items()}
    return BenchSummary(
        schema=SCHEMA, pid=1, mapping="memcg-protect,mm-intent", mappings=["memcg-protect", "mm-intent"],
        baseline="none", swap={"kind": "zram", "device": "/dev/zram1"}, pressure_pct=30.0, pressure_mode="limit",
        reps=3, cold_classes=["cold-spillable", "recompute-ok", "done"], variants=per,
        timer_overhead_ns={"p50": 70.0, "p99": 90.0}, damon={"status": "skipped"}, mglru={"status": "skipped"},
        ebpf={"status": "skipped"}, psi={"status": "available"}, zswap={"status": "not used"},
        zram_mm_stat_at_end={}, headline=headline(reps, "none", "memcg-protect"),
        mm_intent=mm_intent_doc(reps, {}), comparison=comparison(per, reps, "memcg-protect", {}))


def test_the_summary_is_strict_json_and_reads_back_unchanged() -> None:
    s = _summary()
    doc = s.as_dict()
    text = json.dumps(doc, allow_nan=False)            # the one conversion: no NaN left anywhere
    back = strict_loads(text)
    assert back["variants"]["mm-intent"]["reclaim_share_cold"]["per_rep"] == [None, None, None]
    assert BenchSummary.from_json(back).as_dict() == doc
    row = back["comparison"]["variants"]
    assert row["none"]["verdicts"]["decode_critical_p99_no_worse_than_reference"]["status"] == "missed"
    assert "decode_critical_p99_no_worse_than_reference" not in row["memcg-protect"]["verdicts"]
    assert back["variants"]["none"]["per_rep"][0] == {"memcg_version": 1, "squeeze_limit_bytes": 1 << 20,
                                                      "limit_error": None}


def _v1(doc: dict) -> dict:
    """The same run as kvds wrote it before schema /2: no keys /2 added, the p99 verdict unpaired with goal <= 1."""
    old = json.loads(json.dumps(doc))
    old["schema"] = "kvds.vm-bench/1"
    old["comparison"].pop("reference_unavailable")
    for k in ("intent_damos", "intent_damos_decode_critical_swapped_out", "intent_damos_decode_critical_p99_us"):
        old["headline"].pop(k)
    for row in old["comparison"]["variants"].values():
        v = row["verdicts"].get("decode_critical_p99_no_worse_than_reference")
        if v:
            v["goal"] = v["goal"].replace("<= 1.25", "<= 1")
        else:
            row.pop("decode_critical_p99_ratio_over_reference")
    return old


def _stored(doc: dict) -> Run:
    run = ResultStore().new_run("vm-bench", {"reference": "memcg-protect"})
    run.write_summary(doc)
    return run


def _render(run: Run, tmp_path: Path) -> tuple[str, ReportContext]:
    ctx = ReportContext([Suite("host", None, [], [run])], Document(tmp_path), tmp_path / "figures")
    report_section.render(ctx)
    return ctx.doc.markdown(), ctx


def test_a_run_stored_before_schema_2_loads_and_the_report_says_it_predates(kvds_env: dict, tmp_path: Path) -> None:
    old = _v1(_summary().as_dict())
    s = BenchSummary.from_json(old)
    assert s.headline.intent_damos is None and s.comparison.reference_unavailable is None
    md, ctx = _render(_stored(old), tmp_path / "old")
    assert "| memcg-protect | 3 |" in md and "(reference)" in md
    assert "predates kvds.vm-bench/2" in md and "kvds vm compare" in md
    assert ctx.headlines["decode-critical pages swapped out, intent"]["host"] == 0.0
    new_md, new_ctx = _render(_stored(_summary().as_dict()), tmp_path / "new")
    assert "predates" not in new_md
    line = new_ctx.verdicts["host"]["vm: none decode-critical re-access p99 no worse than memcg-protect's"]
    assert line.startswith("missed (goal decode-critical p99 / memcg-protect's <= 1.25")


def test_the_renderer_takes_the_typed_summary_and_prints_fmt_estimates(capsys) -> None:
    from kernel_vm import render

    s = BenchSummary.from_json(_summary().as_dict())
    render.bench(s)
    out = capsys.readouterr().out
    assert "vm bench: swap=zram (/dev/zram1)" in out and "memcg-protect" in out and "nan" not in out.lower()
    # the mm-intent variant's squeeze took nothing: its cold share is missing, printed as fmt prints a missing value
    assert "from cold classes (cold-spillable, recompute-ok, done): - (no data)" in out
    assert "headline: decode-critical pages swapped out: none 40 [40, 40] vs memcg-protect 0 [0, 0]" in out
