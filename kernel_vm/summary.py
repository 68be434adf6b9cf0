"""The typed summary of a `kvds vm bench` run and the pure functions that compute it from the repetitions.

summary.json (and `--json`'s summary) is BenchSummary.as_dict(): the one place it becomes JSON (NaN as null).
The report and the text tables read BenchSummary.from_json, never string keys; a run stored by an earlier kvds
(schema kvds.vm-bench/1) reads back the same way: its keys are the same, a key it did not write is None (or the
field's default), and its p99 verdicts carry their own goal (`<= 1`, unpaired; see kernel_vm/paired_p99.py). Every
class is a harness.results.StoredSummary: the nested ones (STRICT = False) are converted once, with the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from harness import stats
from harness.results import StoredSummary
from kernel_vm.mix import CLASSES
from kernel_vm.paired_p99 import DC, p99_vs_reference
from kernel_vm.repetition import RepResult

SCHEMA = "kvds.vm-bench/2"
"""/2: the p99 verdict against the reference is paired by repetition and judged within paired_p99.MARGIN
(/1: unpaired, <= 1). The keys are those of /1."""
COLD_CLASSES = ("cold-spillable", "recompute-ok", "done")
"""The classes whose pages *should* pay for pressure; reclaim_share_cold is the share they paid."""
CLASS_BOOTSTRAPS = 400
"""Resamples for the per-class CIs (about 10^5 samples each: 1000 took minutes on a loaded 2-CPU host); the
headline's decode-critical figures use the harness default of 1000."""
I_DC = [c.value for c in CLASSES].index(DC)


@dataclass(frozen=True)
class ClassFigures(StoredSummary):
    """One intent class of one variant over its repetitions (counts: per_rep and mean {value, lo, hi})."""
    pages: int                          # pages of the class
    reaccess_us: dict[str, Any]         # p50, p99: {value, lo, hi, conf} in us (cluster bootstrap over repetitions)
    swapped_out_pages: dict[str, Any]   # swap PTE after the squeeze (includes the mapping's own PAGEOUT)
    swapped_out_after_apply: dict[str, Any]  # the same after the madvise phase: what the mapping pushed out
    taken_by_squeeze_pages: dict[str, Any]   # present before the limit minus present after it
    resident_pages: dict[str, Any]      # present after the squeeze
    dropped_pages: dict[str, Any]       # neither present nor swapped after the squeeze (DONTNEED)
    major_faults: dict[str, Any]        # per_rep: major faults during the class's re-access pass
    minor_faults: dict[str, Any]        # per_rep: minor faults during the class's re-access pass

    STRICT = False


@dataclass(frozen=True)
class VariantSummary(StoredSummary):
    """One variant (a mapping, possibly @MGLRU state or +damos) over its repetitions."""
    classes: dict[str, ClassFigures]    # per intent class, in decode order
    reclaim_share_cold: dict[str, Any]  # share of swapped-out pages from COLD_CLASSES (per_rep, mean)
    eviction_share_cold: dict[str, Any]  # the same over swapped + dropped pages
    squeeze_share_cold: dict[str, Any]  # the same over the pages the limit itself took
    per_rep: list[dict[str, Any]]       # each repetition's facts (repetition.RepFacts: limits, placement proof, PSI)

    STRICT = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VariantSummary:
        v = super().from_json(d or {})
        return replace(v, classes={k: ClassFigures.from_json(c) for k, c in (v.classes or {}).items()},
                       per_rep=v.per_rep or [])


@dataclass(frozen=True)
class Headline(StoredSummary):
    """Decode-critical pages lost and re-access p99, the baseline against the first intent mapping."""
    baseline: str | None                # variant name of the baseline
    intent: str | None                  # variant name of the first intent mapping
    baseline_decode_critical_swapped_out: dict[str, Any] | None  # per_rep, mean
    intent_decode_critical_swapped_out: dict[str, Any] | None    # per_rep, mean
    baseline_decode_critical_p99_us: dict[str, Any] | None = None  # {value, lo, hi} in us
    intent_decode_critical_p99_us: dict[str, Any] | None = None    # {value, lo, hi} in us
    decode_critical_p99_ratio_intent_over_baseline: dict[str, Any] | None = None  # stats.rep_ratio
    intent_damos: str | None = None     # the DAMOS variant where DAMON ran
    intent_damos_decode_critical_swapped_out: dict[str, Any] | None = None  # per_rep, mean
    intent_damos_decode_critical_p99_us: dict[str, Any] | None = None       # {value, lo, hi} in us

    STRICT = False


@dataclass(frozen=True)
class ComparisonRow(StoredSummary):
    """One variant against the reference mapping (the guest-lab table: one row per mapping)."""
    reps: int                           # repetitions of the variant
    decode_critical_swapped_out: dict[str, Any]  # per_rep, mean {value, lo, hi} (t interval, floor 0)
    decode_critical_p99_us: dict[str, Any] | None  # {value, lo, hi} in us
    reclaim_share_cold: dict[str, Any] | None    # the variant's reclaim_share_cold mean
    verdicts: dict[str, dict[str, Any]]  # decode_critical_swapped_out_zero, decode_critical_p99_no_worse_than_reference
    decode_critical_p99_ratio_over_reference: dict[str, Any] | None = None  # paired_p99.p99_vs_reference

    STRICT = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ComparisonRow:
        v = super().from_json(d or {})
        return replace(v, verdicts=v.verdicts or {})


@dataclass(frozen=True)
class Comparison(StoredSummary):
    """Every variant judged against `reference` (`--reference`); variants the kernel cannot run, with why."""
    reference: str | None              # the reference's variant name (None without --reference)
    variants: dict[str, ComparisonRow]  # per variant
    unavailable: dict[str, str]         # variant -> the doctor's reason
    reference_unavailable: str | None = None  # why the asked-for reference did not run

    STRICT = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Comparison:
        v = super().from_json(d or {})
        return replace(v, variants={k: ComparisonRow.from_json(r) for k, r in (v.variants or {}).items()},
                       unavailable=v.unavailable or {})


@dataclass(frozen=True)
class BenchSummary(StoredSummary):
    """summary.json of a `vm-bench` run (and `kvds vm bench --json`'s summary)."""
    schema: str                         # kvds.vm-bench/N
    pid: int                            # the kvds process (its cgroups were named kvds-<pid>-vm-*)
    mapping: str                        # --mapping as given
    mappings: list[str]                 # the --mapping list; variants of unavailable ones are absent
    baseline: str                       # the no-intent mapping
    swap: dict[str, Any]                # kind, device, size_bytes (+ zram comp_algorithm, zswap parameters)
    pressure_pct: float                 # share of the arena that may not stay resident, percent
    pressure_mode: str                  # limit or antagonist
    reps: int                           # repetitions per variant, alternating
    cold_classes: list[str]             # the classes whose pages should pay (COLD_CLASSES)
    variants: dict[str, VariantSummary]  # per variant
    timer_overhead_ns: dict[str, float]  # p50, p99 of back-to-back perf_counter_ns
    damon: dict[str, Any]               # status, reason (+ per_class, vaddr_apply where DAMOS ran)
    mglru: dict[str, Any]               # status, reason
    ebpf: dict[str, Any]                # status, reason
    psi: dict[str, Any]                 # status, reason
    zswap: dict[str, Any]               # before / after pool counters for --swap zswap, else status
    zram_mm_stat_at_end: dict[str, Any]  # the zram device's mm_stat at the end
    headline: Headline                  # baseline vs the first intent mapping
    mm_intent: dict[str, Any]           # status (consumer, registry only, unavailable, not used), reason, counters
    comparison: Comparison              # every variant against --reference
    clock: str = "wall"                 # what the latencies are in: wall, or icount:N (guest instructions x 2**N ns)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BenchSummary:
        """The nested figures typed again; what an older run did not write reads as empty (its tables say so)."""
        v = super().from_json(d)
        return replace(v, variants={k: VariantSummary.from_json(x) for k, x in (v.variants or {}).items()},
                       headline=Headline.from_json(v.headline or {}), comparison=Comparison.from_json(v.comparison),
                       damon=v.damon or {}, mglru=v.mglru or {}, ebpf=v.ebpf or {}, psi=v.psi or {},
                       mm_intent=v.mm_intent or {}, swap=v.swap or {},
                       cold_classes=v.cold_classes or list(COLD_CLASSES), clock=v.clock or "wall")


VmBenchSummary = BenchSummary  # the name before every verb's summary was <Verb>Summary (tests/qemu reads it)


@dataclass(frozen=True)
class CompareSummary(StoredSummary):
    """`kvds vm compare`'s summary (it files no run): a stored vm-bench run's decode-critical p99 judged again."""
    source_run: str                     # the vm-bench run whose samples were read
    reference: str                      # the reference variant
    q: float                            # the percentile compared (99)
    margin: float                       # non-inferiority margin: met when the whole interval is <= margin
    variants: dict[str, dict[str, Any]]  # per variant: paired_p99.P99VsReference.as_dict() (pairs, ratio, verdict)
    clock: str = "wall"                 # the run's clock: wall, or icount:N (QEMU guest instruction-count time)


# ------------------------------------------------------------------------------------------------------------------
# Pure summarising functions: repetitions in, typed figures out.

def us(e: stats.Estimate) -> dict[str, float]:
    d = e.as_dict()
    return {k: (v / 1000.0 if k in ("value", "lo", "hi") else v) for k, v in d.items()}


def _counts(per_rep: list[int], floor: float | None = None) -> dict[str, Any]:
    return {"per_rep": per_rep, "mean": stats.mean_ci(per_rep, floor=floor).as_dict()}


def _share(per_rep: list[float]) -> dict[str, Any]:
    return {"per_rep": per_rep, "mean": stats.mean_ci([x for x in per_rep if x == x]).as_dict()}


def summarize_variant(reps: list[RepResult]) -> VariantSummary:
    """Per-class figures of one variant over its repetitions."""
    classes: dict[str, ClassFigures] = {}
    for i, cls in enumerate(CLASSES):
        lat = [r.latency_ns[cls.value] for r in reps if cls.value in r.latency_ns]
        if not lat:
            continue
        pct = stats.rep_percentiles(lat, (50.0, 99.0), n_boot=CLASS_BOOTSTRAPS)
        per = {k: [r.residency["after_pressure"][k][i] for r in reps] for k in ("resident", "swapped", "absent")}
        taken = [r.residency["after_apply"]["resident"][i] - r.residency["after_pressure"]["resident"][i]
                 for r in reps]
        classes[cls.value] = ClassFigures(
            pages=int(lat[0].size), reaccess_us={"p50": us(pct[50.0]), "p99": us(pct[99.0])},
            swapped_out_pages=_counts(per["swapped"]),
            swapped_out_after_apply=_counts([r.residency["after_apply"]["swapped"][i] for r in reps]),
            taken_by_squeeze_pages=_counts(taken), resident_pages=_counts(per["resident"]),
            dropped_pages=_counts(per["absent"]),
            major_faults={"per_rep": [r.faults[cls.value]["major"] for r in reps]},
            minor_faults={"per_rep": [r.faults[cls.value]["minor"] for r in reps]})
    cold = [i for i, c in enumerate(CLASSES) if c.value in COLD_CLASSES]
    swapped, evicted, squeezed = [], [], []
    for r in reps:
        sw = np.array(r.residency["after_pressure"]["swapped"])
        gone = sw + np.array(r.residency["after_pressure"]["absent"])
        took = np.array(r.residency["after_apply"]["resident"]) - np.array(r.residency["after_pressure"]["resident"])
        swapped.append(float(sw[cold].sum() / sw.sum()) if sw.sum() else float("nan"))
        evicted.append(float(gone[cold].sum() / gone.sum()) if gone.sum() else float("nan"))
        squeezed.append(float(took[cold].sum() / took.sum()) if took.sum() > 0 else float("nan"))
    return VariantSummary(classes, _share(swapped), _share(evicted), _share(squeezed),
                          [r.facts.as_dict() for r in reps])


def _dc_swapped(reps: list[RepResult]) -> list[int]:
    return [r.residency["after_pressure"]["swapped"][I_DC] for r in reps]


def _dc_latency(reps: list[RepResult]) -> list[np.ndarray]:
    return [r.latency_ns[DC] for r in reps if DC in r.latency_ns]


def _p99_us(reps: list[RepResult]) -> dict[str, Any] | None:
    lat = _dc_latency(reps)
    return us(stats.rep_percentiles(lat, (99.0,))[99.0]) if lat else None


def headline(variants: dict[str, list[RepResult]], base: str, intent: str, damos: str | None = None) -> Headline:
    """Decode-critical pages lost and decode-critical re-access p99, baseline vs intent (and the DAMOS variant)."""
    a, b = _dc_latency(variants[intent]), _dc_latency(variants[base])
    dv = damos if damos in variants else None
    return Headline(
        base, intent, _counts(_dc_swapped(variants[base])), _counts(_dc_swapped(variants[intent])),
        _p99_us(variants[base]), _p99_us(variants[intent]),
        stats.rep_ratio(a, b, 99.0).as_dict() if a and b else None,
        dv, _counts(_dc_swapped(variants[dv])) if dv else None, _p99_us(variants[dv]) if dv else None)


def comparison(summ: dict[str, VariantSummary], variants: dict[str, list[RepResult]], reference: str | None,
               unavailable: dict[str, str], reference_unavailable: str | None = None) -> Comparison:
    """The guest-lab table: per variant, decode-critical pages swapped out, decode-critical re-access p99 and the
    cold classes' share of reclaim, each with its interval over repetitions; verdicts by interval (harness.stats):
    decode-critical swapped out <= 0, and decode-critical p99 / the reference's p99 <= paired_p99.MARGIN (no worse),
    repetition r paired with the reference's repetition r (kernel_vm/paired_p99.py)."""
    judged = p99_vs_reference({n: [r.latency_ns.get(DC, np.empty(0)) for r in reps] for n, reps in variants.items()},
                              reference) if reference in variants else {}
    rows = {}
    for name, reps in variants.items():
        sw = stats.mean_ci(_dc_swapped(reps), floor=0)
        verdicts = {"decode_critical_swapped_out_zero": stats.judge_at_most(sw, 0, f"{DC} swapped out ").as_dict()}
        ratio = None
        if name in judged and judged[name].ratio.n:  # both sides have decode-critical reads
            ratio = judged[name].ratio.as_dict()
            verdicts["decode_critical_p99_no_worse_than_reference"] = judged[name].verdict.as_dict()
        rows[name] = ComparisonRow(len(reps), {"per_rep": _dc_swapped(reps), "mean": sw.as_dict()}, _p99_us(reps),
                                   summ[name].reclaim_share_cold["mean"], verdicts, ratio)
    return Comparison(reference, rows, unavailable, reference_unavailable)


def mm_intent_doc(variants: dict[str, list[RepResult]], unavailable: dict[str, str]) -> dict[str, Any]:
    """Whether the kernel's reclaim read the registry in this run: `consumer` (its stats file exists; the
    counters' sum over every registering repetition), `registry only` (intents recorded, nothing reads them),
    `unavailable` (the doctor's reason) or `not used`."""
    facts = [r.facts.mm_intent for reps in variants.values() for r in reps if r.facts.mm_intent]
    if not facts:
        if unavailable:
            return {"status": "unavailable", "reason": "; ".join(unavailable.values())}
        return {"status": "not used", "reason": "no mapping registers mm_intent ranges"}
    if all(f.get("reclaim_stats") is not None for f in facts):
        total: dict[str, int] = {}
        for f in facts:
            for k, v in f["reclaim_stats"].items():
                total[k] = total.get(k, 0) + int(v)
        return {"status": "consumer", "reason": "reclaim reads the registry (debugfs mm_intent/stats present)",
                "reclaim_stats_total": total}
    return {"status": "registry only", "reason": "no /sys/kernel/debug/mm_intent/stats: this kernel records the "
            "intents but nothing in reclaim reads them (the series without its reclaim consumer)"}


def damon_per_class(variants: dict[str, list[RepResult]]) -> dict[str, Any]:
    """Per class over every DAMOS repetition: the scheme (action, ops, scope) and its stats per rep (regions and
    bytes tried / applied, quota exceeds)."""
    out: dict[str, Any] = {}
    for vname, reps in variants.items():
        for r in reps:
            d = r.facts.damon or {}
            for cls, st in (d.get("stats") or {}).items():
                c = out.setdefault(cls, {**d["schemes"][cls], "variants": {}})
                v = c["variants"].setdefault(vname, {k: [] for k in ("nr_tried", "sz_tried", "nr_applied",
                                                                     "sz_applied", "qt_exceeds")})
                for k in v:
                    v[k].append(int(st.get(k, 0)))
            for cls, why in (d.get("left_out") or {}).items():
                out.setdefault(cls, {"left_out": why})
    return out

