"""One variant's figures from its repetitions, with bootstrap intervals: latency percentiles, the three clocks,
stalls, interference against the unloaded reference (paired by repetition), spill MB/s and the share kept,
block-layer classes and whether the spill's writes carried the priority asked for. summary.json's keys are the
typed VariantFigures (io_priority/summary.py), documented in io_priority/README.md and kept stable for the report.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness import stats
from io_priority import clocks as clockmod, load_rule, pairing, stalls as stallmod
from io_priority.summary import VariantFigures
from io_priority.variant_runs import Variant
from io_priority.workload import RepResult

QS = (50.0, 90.0, 99.0, 99.9)
QNAMES = {50.0: "p50", 90.0: "p90", 99.0: "p99", 99.9: "p99.9"}


def ebpf_class_counts(doc: dict[str, Any], device_name: str) -> dict[str, dict[str, int]]:
    """Requests per direction ("R", "W", "other") and class ("rt", "be", ...) in one eBPF session's block
    histograms (issue -> complete pairs on `device_name`), keyed like the tracefs counts (`block_layer`)."""
    ops = {"read": "R", "write": "W"}
    out: dict[str, dict[str, int]] = {}
    per_dev = doc.get("blk", {}).get("issue_to_complete", {}).get(device_name, {})
    for klass, by_op in per_dev.items():
        for op, h in by_op.items():
            key = ops.get(op, "other")
            out.setdefault(key, {})[klass] = out.setdefault(key, {}).get(klass, 0) + int(h["count"])
    return out


def _merge_ebpf(reps: list[RepResult], device_name: str) -> dict[str, dict[str, int]] | None:
    docs = [r.ebpf for r in reps if r.ebpf is not None]
    if not docs:
        return None
    out: dict[str, dict[str, int]] = {}
    for d in docs:
        for op, counts in ebpf_class_counts(d, device_name).items():
            for k, n in counts.items():
                out.setdefault(op, {})[k] = out.setdefault(op, {}).get(k, 0) + n
    return out


def _est(e: stats.Estimate, scale: float = 1.0) -> dict[str, Any]:
    """An estimate as summary.json stores it; "reason" says why the value or the interval is missing."""
    out: dict[str, Any] = {"value": e.value * scale, "lo": e.lo * scale, "hi": e.hi * scale, "conf": e.conf}
    if e.reason:
        out["reason"] = e.reason
    if e.n is not None:
        out["n"] = e.n
    return out


def estimate_of(d: dict[str, Any] | None) -> stats.Estimate:
    """A stored estimate dict back as a stats.Estimate (null -> NaN), for judging stored runs."""
    if not d:
        return stats.Estimate(math.nan, math.nan, math.nan, reason="no data")

    def num(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan

    return stats.Estimate(num(d.get("value")), num(d.get("lo")), num(d.get("hi")), d.get("conf", 0.95),
                          d.get("reason", ""), d.get("n"))


def _merge_block(reps: list[RepResult]) -> dict[str, Any] | None:
    blocks = [r.block for r in reps if r.block]
    if not blocks:
        return None
    by_op: dict[str, dict[str, int]] = {}
    issuers: dict[str, dict[str, int]] = {}
    lost = 0
    for b in blocks:
        lost += b["lost_events"]
        for op, counts in b["by_op"].items():
            for prio, n in counts.items():
                by_op.setdefault(op, {})[prio] = by_op.setdefault(op, {}).get(prio, 0) + n
        for key, counts in b.get("issuers_by_prio", {}).items():
            for comm, n in counts.items():
                issuers.setdefault(key, {})[comm] = issuers.setdefault(key, {}).get(comm, 0) + n
    return {"by_op": by_op, "lost_events": lost, "issuers_by_prio": issuers}


def write_priority_check(asked: str | None, block: dict[str, Any] | None,
                         buffered: bool = False) -> dict[str, Any] | None:
    """Did the spill's write requests reach the block layer with the priority the writer asked for?
    Page-cache writeback started by the flusher is issued by kworkers at their own be/4, whatever the
    writer's class (PLATFORM.md); writeback the writer's own fsync starts carries the writer's class. This
    says which share was which from the trace, not by assumption."""
    if not asked or not block or not block["by_op"].get("W"):
        return None
    writes = block["by_op"]["W"]
    total = sum(writes.values())
    honoured = writes.get(asked, 0)
    other = {p: n for p, n in writes.items() if p != asked}
    who = {p: block.get("issuers_by_prio", {}).get(f"W {p}", {}) for p in other}
    escaped = total - honoured
    out = {"asked": asked, "write_requests": total, "honoured_fraction": honoured / total, "seen_instead": other,
           "issued_by": who, "note": None}
    kinds = sorted({k for c in who.values() for k in c})
    if escaped and (buffered or escaped / total > 0.1):
        out["note"] = (f"{escaped} of {total} spill write requests ({escaped / total:.0%}) reached the block layer as "
                       f"{', '.join(sorted(other))} instead of the writer's {asked} (tasks at issue: "
                       f"{', '.join(kinds) or '?'}; a dispatching task may issue others' requests)")
        if buffered:
            out["note"] += (": page-cache writeback by the flusher ignores the writer's I/O priority; the rest was "
                            "written back by the writer's own fsync, which carries its class")
    elif buffered:
        out["note"] = (f"all {total} spill write requests carried the writer's {asked}: its own fsync wrote the "
                       "pages back before the flusher did (flusher writeback would ignore the class; try "
                       "--fsync-every-mib 0 --dirty-background-ratio 1)")
    return out


def summarize_variant(v: Variant, reps: list[RepResult], engine: str,
                      unloaded: list[RepResult] | None, n_boot: int = 1000,
                      device_name: str | None = None, buffered: bool = False,
                      stall_ms: float = stallmod.DEFAULT_STALL_MS,
                      found: list[stallmod.RepStalls] | None = None,
                      ufound: list[stallmod.RepStalls] | None = None,
                      pairs: list[pairing.Pair] | None = None) -> dict[str, Any]:
    """One variant's figures; pairs: its repetitions that ran side by side with the unloaded reference's
    (io_priority.pairing.side_by_side), from which every interference figure is resampled by pair."""
    groups = [r.latencies_ns for r in reps]
    boot = stats.rep_percentiles(groups, QS, n_boot=n_boot)
    allv = np.concatenate(groups) if groups else np.array([], dtype=np.int64)
    out: dict[str, Any] = {
        "mapping": v.mapping.name if v.mapping else None,
        "applied": v.plan(engine).as_dict() if v.mapping else None,
        "reps": len(reps),
        "reads": int(sum(r.reader["reads"] for r in reps)),
        "read_errors": int(sum(r.reader["errors"] for r in reps)),
        "late_reads": int(sum(r.reader["late"] for r in reps)),
        "latency_us": {QNAMES[q]: _est(boot[q], 1e-3) for q in QS},
        "max_us": float(allv.max()) / 1e3 if allv.size else math.nan,
        "per_rep_p99_us": [float(np.percentile(g, 99)) / 1e3 if stats.tail_supported(g.size, 99.0) else math.nan
                           for g in groups],
        "interference_factor": None,
        "spill_mb_s": None,
        "spill_mb_s_per_rep": None,
        "writes": None,
        "write_errors": None,
        "spill_gated_fraction": None,
        "block_layer": _merge_block(reps),
        "ebpf_block_layer": _merge_ebpf(reps, device_name) if device_name else None,
    }
    out["overlap"] = _overlap(reps, unloaded, n_boot) if v.mapping is not None else None
    out["host_load"] = load_rule.variant_load(reps)
    # three clocks (+ the block layer's), over every read and without the reads stalls delayed
    found = found if found is not None else stallmod.find_all(reps, stall_ms)
    ufound = ufound if ufound is not None else (stallmod.find_all(unloaded, stall_ms) if unloaded else None)
    ref = unloaded if unloaded and v.mapping is not None else None
    out["clocks"] = clockmod.summarize(reps, None, ref, None, _est, n_boot, pairs)
    keep = [~f.affected if f.affected is not None else None for f in found]
    ukeep = [~f.affected if f.affected is not None else None for f in ufound] if ufound else None
    out["stalls"] = stallmod.summary(found, stall_ms)
    out["stall_free"] = clockmod.summarize(reps, keep, ref, ukeep if ref else None, _est, n_boot, pairs)
    out["block_service_us"] = clockmod.block_service(reps, _est, n_boot)
    # per repetition, stall-free service p99: what the reference's reproducibility is judged from
    out["per_rep_service_p99_us"] = _per_rep_service_p99(reps, keep)
    plan = v.plan(engine)
    out["write_priority"] = write_priority_check(str(plan.write_prio) if plan and plan.write_prio else None,
                                                 out["block_layer"], buffered)
    if unloaded and v.mapping is not None:
        e, how = pairing.ratio(groups, [r.latencies_ns for r in unloaded], pairs, q=99.0, n_boot=n_boot)
        out["interference_factor"] = {**_est(e), "pairing": how}
    writers = [r for r in reps if r.writer]
    if writers:
        mbs = [r.spill_mb_s or 0.0 for r in writers]
        out["spill_mb_s"] = _est(stats.mean_ci(mbs, floor=0.0))
        out["spill_mb_s_per_rep"] = mbs
        out["writes"] = int(sum(r.writer["writes"] for r in writers))
        out["write_errors"] = int(sum(r.writer["errors"] for r in writers))
        out["spill_gated_fraction"] = float(np.mean([r.writer["gated_ns"] / r.writer["elapsed_ns"]
                                                     for r in writers]))
        out["final_fsync_ms"] = float(np.mean([r.writer["final_fsync_ns"] / 1e6 for r in writers]))
        if v.plan(engine) and v.plan(engine).pacing == "deadline":  # spill scheduler v2's learned model
            out["spill_v2"] = {"model_q": writers[0].writer.get("model_q"),
                               "batches": [r.writer.get("batches", 0) for r in writers],
                               "probes": [r.writer.get("probes", 0) for r in writers],
                               "skipped_windows": [r.writer.get("skipped_windows", 0) for r in writers],
                               "model": [r.writer.get("model", []) for r in writers]}
        if v.plan(engine) and v.plan(engine).pacing == "slack":  # what the pacer learned, per repetition
            out["pacer"] = {"est_write_us": [r.writer.get("est_service_ns", 0) / 1e3 for r in writers],
                            "est_dev_us": [r.writer.get("est_dev_ns", 0) / 1e3 for r in writers],
                            "est_one_write_us": [r.writer.get("est_one_ns", 0) / 1e3 for r in writers],
                            "skipped_windows": [r.writer.get("skipped_windows", 0) for r in writers]}
    return out


def _overlap(reps: list[RepResult], unloaded: list[RepResult] | None, n_boot: int) -> dict[str, Any] | None:
    """Reads split by whether a spill write shared the device with them (ioload --ctx-out), compared by
    service time (completion - actual issue: an open-loop read's lateness behind earlier reads is excluded).
    If clean reads' service p99 is still far above the unloaded reader's, the interference does not come from
    queueing behind a write the guest can see (the host flushing what the guest wrote, the loop kworker's CPU):
    no pacing of guest submissions can remove it."""
    if any(r.service_ns is None for r in reps):
        return None
    clean = [r.service_ns[~r.overlapped] for r in reps]
    dirty = [r.service_ns[r.overlapped] for r in reps]
    n_all = sum(r.latencies_ns.size for r in reps)
    n_clean = sum(c.size for c in clean)
    out: dict[str, Any] = {"clean_reads": n_clean, "clean_fraction": n_clean / n_all if n_all else None,
                           "clean_service_p99_us": None, "overlapped_service_p99_us": None,
                           "unloaded_service_p99_us": None, "clean_interference_factor": None}
    ref = [r.service_ns for r in unloaded or [] if r.service_ns is not None and r.service_ns.size]
    if ref:
        out["unloaded_service_p99_us"] = _tail_p99_us(np.concatenate(ref))
    clean = [c for c in clean if c.size]
    if clean:
        out["clean_service_p99_us"] = _est(stats.rep_percentiles(clean, (99.0,), n_boot=n_boot)[99.0], 1e-3)
        if ref:
            out["clean_interference_factor"] = _est(stats.rep_ratio(clean, ref, q=99.0, n_boot=n_boot))
    if n_all - n_clean:
        out["overlapped_service_p99_us"] = _tail_p99_us(np.concatenate(dirty))
    return out


def _per_rep_service_p99(reps: list[RepResult], keep: list[np.ndarray | None]) -> list[float] | None:
    """Each repetition's stall-free service-time p99 (us; NaN under stats.min_samples_for(99) reads)."""
    if not all(r.has_clocks for r in reps):
        return None
    out = []
    for r, k in zip(reps, keep):
        svc = r.service_clock_ns if k is None else r.service_clock_ns[k]
        out.append(float(np.percentile(svc, 99)) / 1e3 if stats.tail_supported(svc.size, 99.0) else math.nan)
    return out


def _tail_p99_us(ns: np.ndarray) -> float | None:
    """p99 in us, or None when fewer than stats.MIN_BEYOND reads lie beyond it."""
    return float(np.percentile(ns, 99)) / 1e3 if stats.tail_supported(ns.size, 99.0) else None


def summarize(variants: list[Variant], results: dict[str, list[RepResult]], engine: str,
              n_boot: int = 1000, device_name: str | None = None, buffered: bool = False,
              stall_ms: float = stallmod.DEFAULT_STALL_MS,
              order: list[tuple[int, str]] | None = None) -> dict[str, Any]:
    """Every variant's figures. order: the (repetition, variant) order as run; with it, interference is
    resampled by the pairs of repetitions that ran side by side with the unloaded reference."""
    unloaded = results.get("unloaded")
    found = {v.label: stallmod.find_all(results[v.label], stall_ms) for v in variants}
    pairs = {v.label: pairing.side_by_side(order, v.label, "unloaded") if order is not None else None
             for v in variants}
    modes = {v.label: summarize_variant(v, results[v.label], engine, unloaded, n_boot, device_name, buffered,
                                        stall_ms, found[v.label], found.get("unloaded"), pairs[v.label])
             for v in variants}
    base = modes.get("baseline", {}).get("spill_mb_s")
    base_reps = modes.get("baseline", {}).get("spill_mb_s_per_rep")
    for v in variants:
        if modes[v.label].get("spill_v2") and base:
            modes[v.label]["spill_v2"]["window"] = _v2_window(results[v.label], modes[v.label]["spill_v2"],
                                                              base["value"], unloaded)
    for m in modes.values():
        if base and m["spill_mb_s"] and base["value"] > 0:
            m["spill_retained"] = m["spill_mb_s"]["value"] / base["value"]
            # the share kept with its interval over repetitions (what the sweep's goal is judged from)
            m["spill_retained_est"] = _est(stats.rep_mean_ratio(m["spill_mb_s_per_rep"], base_reps, n_boot=n_boot))
        else:
            m["spill_retained"] = None
            m["spill_retained_est"] = None
    # every key through the typed figures: a key the dataclass does not name fails here, not in a reader
    return {label: VariantFigures(**m).as_dict() for label, m in modes.items()}


def _v2_window(reps: list[RepResult], v2: dict[str, Any], base_mb_s: float,
               unloaded: list[RepResult] | None) -> dict[str, Any] | None:
    """What keeping half the spill asks of one read interval, against what spill scheduler v2 learned the device
    delivers: the bytes a window must carry (half the baseline's MB/s x the interval), the time a window offers
    (the interval minus the unloaded reader's median service time), the device write rate that would need inside
    that time at the model's tail, and per repetition the largest batch whose learned tail fit in it."""
    due = next((r.clocks[:, 0] for r in reps if r.has_clocks and r.clocks.shape[0] > 2), None)
    if due is None or not _num(base_mb_s):
        return None
    interval_ns = float(np.median(np.diff(due)))
    svc = [r.service_clock_ns for r in unloaded or [] if r.has_clocks]
    read_ns = float(np.median(np.concatenate(svc))) if svc else 0.0
    free_ns = max(interval_ns - read_ns, 0.0)
    need = 0.5 * base_mb_s * 1e6 * interval_ns / 1e9
    fits = [max([b["size"] * b["depth"] for b in rep if b["n"] >= 4 and 0 < b["tail_ns"] <= free_ns], default=0)
            for rep in v2.get("model", [])]
    return {"interval_ms": interval_ns / 1e6, "free_ms": free_ns / 1e6, "needed_mib_per_window": need / 2**20,
            "needed_write_mb_s_at_tail": need / 1e6 / (free_ns / 1e9) if free_ns else None,
            "largest_fitting_batch_mib_per_rep": [f / 2**20 for f in fits]}


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
