"""`kvds vm lazy`'s figures: per mechanism and pressure, what went to the slow tier, what came back, and the
decode-critical tail, each judged against the reference mechanism (default madvise-only, the eager one).

Why these three: MADV_PAGEOUT writes its pages to swap when it is called, whether or not memory is short, and a
page written out and read again is a refault; a registered reclaimable intent (or MADV_COLD) only reorders what
reclaim takes, so it costs nothing until reclaim runs. Pure functions of repetitions (kernel_vm/repetition.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from harness.results import StoredSummary
from kernel_vm import experiment_figures as fig
from kernel_vm.paired_p99 import MARGIN, p99_vs_reference
from kernel_vm.repetition import RepResult

SCHEMA = "kvds.vm-lazy/2"
"""/2: written bytes from the swap device's block write sectors (/1 read pswpout, absent from the guest's /proc/vmstat:
its written figures are 0 and not a measurement)."""
DC = "decode-critical"


@dataclass(frozen=True)
class LazyRep:
    """What one repetition contributes (not stored as such: the rows keep the per-repetition lists)."""
    written_pages: int          # pages written to the swap device over the repetition (its block write sectors)
    written_in_apply_pages: int  # arena pages swapped out right after the apply phase: the mapping's own writes
    refaults: int               # major faults of the arena process during the re-access of every page
    refaults_by_class: dict[str, int]
    dc_swapped_out: int         # decode-critical pages with a swap PTE after the squeeze
    dc_latency_ns: np.ndarray   # decode-critical first-touch re-access latencies


def lazy_rep(res: RepResult, classes: Sequence[str], written_bytes: int, page_bytes: int) -> LazyRep:
    """written_bytes: what the swap device took during the repetition (swap_backend.written_bytes delta)."""
    apply_out = int(sum(res.residency["after_apply"]["swapped"]))
    by_class = {c: int(res.faults.get(c, {}).get("major", 0)) for c in classes}
    dc_swapped = int(res.residency["after_pressure"]["swapped"][list(classes).index(DC)])
    return LazyRep(written_bytes // page_bytes, apply_out, sum(by_class.values()), by_class, dc_swapped,
                   res.latency_ns.get(DC, np.empty(0, dtype=np.int64)))


@dataclass(frozen=True)
class LazyRow(StoredSummary):
    """One mechanism at one pressure (summary `rows[]`)."""
    STRICT = False
    mapping: str                         # the mechanism (a harness/mappings name)
    pressure_pct: float                  # share of the arena that may not stay resident (0: no limit at all)
    written_bytes: dict[str, Any]        # bytes the swap device took over the repetition: per_rep, mean{value, lo, hi}
    written_in_apply_bytes: dict[str, Any]  # arena bytes swapped out right after the apply phase (MADV_PAGEOUT's
    # eager writes, before any pressure)
    refaults: dict[str, Any]             # major faults re-reading the arena: per_rep, mean
    refaults_by_class: dict[str, float]  # mean major faults per repetition, per class
    decode_critical_swapped_out: dict[str, Any]  # pages: per_rep, mean
    decode_critical_p99_us: dict[str, Any]       # pooled p99 {value, lo, hi} over repetitions
    killed_reps: int                     # repetitions whose arena process was OOM-killed (left out of the figures)
    verdicts: dict[str, Any]             # against the reference at this pressure: written_fewer,
    # refaults_fewer (difference per paired repetition < 0), p99_no_worse (paired p99 ratio <= MARGIN)


@dataclass(frozen=True)
class LazySummary(StoredSummary):
    """`kvds vm lazy`: lazy vs eager reclaim hints over a pressure sweep."""
    schema: str                          # kvds.vm-lazy/2
    mappings: list[str]                  # the mechanisms, in --mapping order
    reference: str                       # the mechanism the others are judged against
    pressures_pct: list[float]           # the sweep
    reps: int                            # repetitions per mechanism and pressure (alternating, layout-paired)
    arena_bytes: int                     # the arena
    page_bytes: int                      # page size
    class_pages: dict[str, int]          # pages per class in every repetition
    rows: list[dict[str, Any]]           # LazyRow per mechanism and pressure, pressure-major
    unavailable: dict[str, str]          # mechanism -> the doctor's reason it did not run here
    killed: dict[str, list[str]]         # "<mapping>@<pressure>" -> repetitions whose arena process was killed
    clock: str = "wall"                  # wall, or icount:N (QEMU guest instruction-count time)


def _verdicts(reps: list[LazyRep | None], ref: list[LazyRep | None], p99: Any) -> dict[str, Any]:
    """Differences are judged in pages (the row scales its figures to bytes), over the pairs both sides have."""
    pairs = [(a, b) for a, b in zip(reps, ref) if a is not None and b is not None]
    written = fig.paired_difference([a.written_pages for a, _ in pairs], [b.written_pages for _, b in pairs])
    refaults = fig.paired_difference([a.refaults for a, _ in pairs], [b.refaults for _, b in pairs])
    return {"written_fewer": fig.judge_below(written, "pages written - reference's").as_dict(),
            "refaults_fewer": fig.judge_below(refaults, "refaults - reference's").as_dict(),
            "p99_no_worse": p99.verdict.as_dict() if p99 is not None else None}


def lazy_rows(results: dict[tuple[str, float], list[LazyRep | None]], mappings: Sequence[str], pressures: Sequence[float],
              reference: str, page_bytes: int) -> list[LazyRow]:
    """Rows pressure-major; a mechanism that did not run (unavailable) has no row."""
    out = []
    for p in pressures:
        here = {m: results[(m, p)] for m in mappings if (m, p) in results}
        ref = here.get(reference)
        empty = np.empty(0, dtype=np.int64)  # a killed repetition: no samples, so it pairs with nothing
        p99s = (p99_vs_reference({m: [empty if r is None else r.dc_latency_ns for r in reps]
                                  for m, reps in here.items()}, reference, margin=MARGIN) if ref is not None else {})
        for m, all_reps in here.items():
            reps = [r for r in all_reps if r is not None]
            out.append(LazyRow(
                mapping=m, pressure_pct=p,
                written_bytes=fig.counts([r.written_pages * page_bytes for r in reps]),
                written_in_apply_bytes=fig.counts([r.written_in_apply_pages * page_bytes for r in reps]),
                refaults=fig.counts([r.refaults for r in reps]),
                refaults_by_class={c: float(np.mean([r.refaults_by_class.get(c, 0) for r in reps]))
                                   for c in (reps[0].refaults_by_class if reps else {})},
                decode_critical_swapped_out=fig.counts([r.dc_swapped_out for r in reps]),
                decode_critical_p99_us=fig.p99_us([r.dc_latency_ns for r in reps]),
                killed_reps=len(all_reps) - len(reps),
                verdicts={} if m == reference or ref is None else _verdicts(all_reps, ref, p99s.get(m))))
    return out
