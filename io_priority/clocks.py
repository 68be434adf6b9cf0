"""Three clocks per critical read, and the block layer's as a fourth, so host delay and device delay separate.

- wake-up lateness (host): end-to-end minus the end-to-end the read would have had if the reader had always
  woken on time (the same service times run serially from the due times): the reader waking from its wait and
  getting a CPU, including what an earlier late wake-up carried into this read. What a loaded host adds.
- backlog (device): that on-time end-to-end minus the read's own service: a serial reader's wait for its
  previous reads' service (device time that spilled over into the next read's window).
- service time (device, as the reader sees it): submit -> complete.
- end-to-end: due -> complete = wake-up + backlog + service (what `latency_us` reports, as before).
- block layer (fourth view): issue -> complete per direction and priority class, from tracefs pairs.

Interference is printed for end-to-end and service time side by side. Which part of the excess over the unloaded
reference came from the host is read off the slowest reads: over the reads at or beyond each variant's
end-to-end p99, the mean of each clock, minus the same for the unloaded reference; the host share is the
wake-up part of that excess (the rest, backlog plus service, is the device's).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from harness import stats
from io_priority import pairing
from io_priority.blocktrace import OPS, class_name
from io_priority.workload import RepResult

CLOCKS = ("end_to_end", "wakeup", "backlog", "service")
QS = (50.0, 99.0)
Est = Callable[[stats.Estimate, float], dict[str, Any]]


def arrays(rep: RepResult, keep: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each clock's per-read values (ns) of one repetition, restricted to `keep` when given."""
    if rep.has_clocks:
        out = {"end_to_end": rep.latencies_ns, "wakeup": rep.wakeup_ns, "backlog": rep.backlog_ns,
               "service": rep.service_clock_ns}
    else:  # a repetition recorded before the clocks existed: end-to-end only
        out = {"end_to_end": rep.latencies_ns}
    return {k: (v[keep] if keep is not None else v) for k, v in out.items()}


def _groups(reps: Sequence[RepResult], masks: Sequence[np.ndarray | None] | None, clock: str) -> list[np.ndarray]:
    out = []
    for k, r in enumerate(reps):
        a = arrays(r, masks[k] if masks else None)
        if clock in a and a[clock].size:
            out.append(a[clock])
    return out


def _aligned(reps: Sequence[RepResult], masks: Sequence[np.ndarray | None] | None, clock: str) -> list[np.ndarray]:
    """One array per repetition, empty where the clock is missing: index k stays repetition k (for pairing)."""
    out = []
    for k, r in enumerate(reps):
        a = arrays(r, masks[k] if masks else None)
        out.append(a.get(clock, np.zeros(0, dtype=np.int64)))
    return out


def tail_composition(reps: Sequence[RepResult], masks: Sequence[np.ndarray | None] | None) -> dict[str, Any] | None:
    """Mean of each clock (us) over the reads at or beyond the pooled end-to-end p99; None when fewer than
    stats.MIN_BEYOND reads lie there."""
    parts = [arrays(r, masks[k] if masks else None) for k, r in enumerate(reps)]
    parts = [p for p in parts if "service" in p]
    if not parts:
        return None
    pooled = {c: np.concatenate([p[c] for p in parts]) for c in CLOCKS}
    n = pooled["end_to_end"].size
    if not stats.tail_supported(n, 99.0):
        return None
    cut = np.percentile(pooled["end_to_end"], 99.0)
    sel = pooled["end_to_end"] >= cut
    return {"reads": int(sel.sum()), **{c: float(pooled[c][sel].mean()) / 1e3 for c in CLOCKS}}


def excess(tail: dict[str, Any] | None, ref: dict[str, Any] | None) -> dict[str, Any]:
    """The slowest reads' excess over the unloaded reference's slowest reads, split host / device."""
    if not tail or not ref:
        return {"end_to_end_us": None, "host_us": None, "device_us": None, "host_share": None,
                "reason": "n too small: the p99 tail needs >= 1000 reads on both sides" if ref is not None or tail
                else "no unloaded reference"}
    total = tail["end_to_end"] - ref["end_to_end"]
    host = tail["wakeup"] - ref["wakeup"]
    device = (tail["backlog"] + tail["service"]) - (ref["backlog"] + ref["service"])
    share = host / total if total > 0 else None
    return {"end_to_end_us": total, "host_us": host, "device_us": device,
            "host_share": None if share is None else min(1.0, max(0.0, share)),
            "reason": None if total > 0 else "no excess over the unloaded reference"}


def summarize(reps: Sequence[RepResult], masks: Sequence[np.ndarray | None] | None,
              unloaded: Sequence[RepResult] | None, umasks: Sequence[np.ndarray | None] | None,
              est: Est, n_boot: int = 1000, pairs: Sequence[pairing.Pair] | None = None) -> dict[str, Any]:
    """Percentiles of every clock, end-to-end and service-time interference side by side, the tail's excess.
    pairs: the repetitions of `reps` and `unloaded` that ran side by side (io_priority.pairing); the
    interference is then resampled by pair, and each figure says which rule it came from ("pairing")."""
    out: dict[str, Any] = {}
    for c in CLOCKS:
        g = _groups(reps, masks, c)
        boot = stats.rep_percentiles(g, QS, n_boot=n_boot) if g else None
        out[f"{c}_us"] = {f"p{q:g}": est(boot[q], 1e-3) for q in QS} if boot else None
    out["interference"] = {"end_to_end": None, "service": None}
    if unloaded:
        for c in ("end_to_end", "service"):
            a, b = _aligned(reps, masks, c), _aligned(unloaded, umasks, c)
            if any(x.size for x in a) and any(x.size for x in b):
                e, how = pairing.ratio(a, b, pairs, q=99.0, n_boot=n_boot)
                out["interference"][c] = {**est(e, 1.0), "pairing": how}
    tail = tail_composition(reps, masks)
    ref = tail_composition(unloaded, umasks) if unloaded else None
    out["tail_us"] = tail
    out["excess"] = excess(tail, ref) if unloaded else None
    return out


def block_service(reps: Sequence[RepResult], est: Est, n_boot: int = 1000) -> dict[str, Any] | None:
    """The fourth view: block-layer issue -> complete (us) per direction and class ("R rt", "W idle")."""
    pairs = [r.blk_pairs for r in reps if r.blk_pairs is not None]
    if not pairs:
        return None
    keys = sorted({(int(op), int(k)) for p in pairs for op, k in zip(p[:, 2], p[:, 3])})
    out: dict[str, Any] = {}
    for op, k in keys:
        g = [(p[:, 1] - p[:, 0])[(p[:, 2] == op) & (p[:, 3] == k)] for p in pairs]
        g = [x for x in g if x.size]
        boot = stats.rep_percentiles(g, QS, n_boot=n_boot)
        out[f"{OPS[op]} {class_name(k)}"] = {"requests": int(sum(x.size for x in g)),
                                             **{f"p{q:g}": est(boot[q], 1e-3) for q in QS}}
    return out


def host_share_text(ex: dict[str, Any] | None) -> str:
    """"host 12% / device 88% of +3.1 ms" for a table cell."""
    if not ex or ex.get("end_to_end_us") is None:
        return "-" if not ex else f"- ({ex.get('reason') or 'no data'})"
    if ex.get("host_share") is None:
        return f"- ({ex.get('reason')})"
    tot = ex["end_to_end_us"]
    return f"host {ex['host_share']:.0%} / device {1 - ex['host_share']:.0%} of +{tot / 1e3:.2f} ms"


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
