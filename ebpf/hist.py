"""Log2 histograms as plain data, printed biolatency-style and drawn as PNGs.

A histogram is a dict {"unit": "usecs", "buckets": [n0, n1, ...], "count": N}: bucket k >= 1 holds values in
[2^(k-1), 2^k - 1] (bucket 1: 0 and 1; bucket 0 stays empty): bcc's bpf_log2l slots (slot = floor(log2 v) + 1) as bcc's
print_log2_hist labels them, so bounds are powers of two and any percentile read from it is an interval, never
a point. (Until 2026-12-01 this module labelled bucket k [2^k, 2^(k+1) - 1]: every bound it printed was twice
the value the kernel had counted.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

Hist = dict[str, Any]


def new_hist(unit: str = "usecs") -> Hist:
    return {"unit": unit, "buckets": [], "count": 0}


def add(h: Hist, slot: int, n: int) -> None:
    b = h["buckets"]
    if len(b) <= slot:
        b.extend([0] * (slot + 1 - len(b)))
    b[slot] += n
    h["count"] += n


def merge(hists: Iterable[Hist]) -> Hist:
    out: Hist | None = None
    for h in hists:
        if out is None:
            out = new_hist(h["unit"])
        for slot, n in enumerate(h["buckets"]):
            if n:
                add(out, slot, n)
    return out if out is not None else new_hist()


def bounds(slot: int) -> tuple[int, int]:
    """The [low, high] values bucket `slot` counts (bcc's print_log2_hist: 0 -> 1, 2 -> 3, 4 -> 7, ...; bpf_log2l
    puts 0 in slot 1 with 1, so slot 0 stays empty)."""
    return (0, 0) if slot == 0 else ((0, 1) if slot == 1 else (1 << (slot - 1), (1 << slot) - 1))


def percentile_bounds(h: Hist, q: float) -> tuple[int, int] | None:
    """The bucket holding the q-th percentile, as (low, high); None when empty."""
    total = h["count"]
    if not total:
        return None
    need = q / 100.0 * total
    seen = 0
    for slot, n in enumerate(h["buckets"]):
        seen += n
        if n and seen >= need:
            return bounds(slot)
    return bounds(len(h["buckets"]) - 1)


def format_log2(h: Hist, title: str = "", width: int = 40) -> str:
    """bcc's print_log2_hist layout, from the first to the last non-empty bucket."""
    b = h["buckets"]
    nz = [i for i, n in enumerate(b) if n]
    lines = [title] if title else []
    if not nz:
        lines.append(f"     (no events)")
        return "\n".join(lines)
    top = max(b)
    lines.append(f"{h['unit']:>20} : count     distribution")
    for slot in range(0, nz[-1] + 1):
        lo, hi = bounds(slot)
        n = b[slot]
        stars = "*" * int(round(width * n / top)) if top else ""
        lines.append(f"{lo:>10} -> {hi:<10}: {n:<8} |{stars:<{width}}|")
    p50, p99 = percentile_bounds(h, 50), percentile_bounds(h, 99)
    lines.append(f"     count {h['count']}, p50 in [{p50[0]}, {p50[1]}] {h['unit']}, "
                 f"p99 in [{p99[0]}, {p99[1]}] {h['unit']}")
    return "\n".join(lines)


def plot(h: Hist, title: str, path: Path) -> Path:
    """One bar chart per histogram (log2 buckets on x, counts on y), Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = h["buckets"]
    nz = [i for i, n in enumerate(b) if n]
    first, last = (nz[0], nz[-1]) if nz else (0, 0)
    slots = list(range(first, last + 1))
    labels = [f"{bounds(s)[0]}-{bounds(s)[1]}" for s in slots]
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(slots) + 2), 3.6))
    ax.bar(range(len(slots)), [b[s] if s < len(b) else 0 for s in slots], color="#3b75af")
    ax.set_xticks(range(len(slots)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_xlabel(f"latency ({h['unit']}, log2 buckets)")
    ax.set_ylabel("count")
    ax.set_title(f"{title}  (n={h['count']})", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
