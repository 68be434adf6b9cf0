"""The sweep's PNG: spill MB/s against critical-read p99 (log scale) per point, with their intervals and the
Pareto frontier (sweep_points.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from io_priority.clocks import finite
from io_priority.sweep_points import mb_s, p99


def _err(e: dict[str, Any], scale: float = 1.0) -> list[list[float]] | None:
    """matplotlib's asymmetric error bar from an interval; None when the interval is missing."""
    lo, hi = e.get("lo"), e.get("hi")
    if not (finite(lo) and finite(hi)):
        return None
    return [[max(0.0, (e["value"] - lo) / scale)], [max(0.0, (hi - e["value"]) / scale)]]


def plot(pts: list[dict[str, Any]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    markers = {"mq-deadline": "o", "bfq": "s", "kyber": "^", "none": "D"}
    variants = sorted({p["variant"] for p in pts})
    colors = {v: plt.cm.tab10(i % 10) for i, v in enumerate(variants)}
    left_out = [f"{p['scheduler']}/{p['variant']}" for p in pts if p99(p) is None or mb_s(p) is None]
    pts = [p for p in pts if p99(p) is not None and mb_s(p) is not None]  # no p99 (n too small): no point
    if left_out:
        ax.text(0.01, 0.01, "not plotted (p99 n too small or no spill): " + ", ".join(left_out),
                transform=ax.transAxes, fontsize=7, va="bottom")
    for p in pts:
        x, y = p["spill_mb_s"], p["p99_us"]
        ax.errorbar(x["value"], y["value"] / 1e3, xerr=_err(x), yerr=_err(y, 1e3),
                    fmt=markers.get(p["scheduler"], "o"), color=colors[p["variant"]], ms=9, capsize=3,
                    mec="black" if p["pareto"] else colors[p["variant"]], mew=2 if p["pareto"] else 1)
        ax.annotate(f"{p['scheduler']}/{p['variant']}", (x["value"], y["value"] / 1e3), fontsize=7,
                    xytext=(5, 4), textcoords="offset points")
    front = sorted((p for p in pts if p["pareto"]), key=mb_s)
    if front:
        ax.plot([p["spill_mb_s"]["value"] for p in front], [p["p99_us"]["value"] / 1e3 for p in front], "k--",
                lw=1, label="Pareto frontier")
    for v in variants:
        ax.plot([], [], "o", color=colors[v], label=v)
    for s, m in markers.items():
        if any(p["scheduler"] == s for p in pts):
            ax.plot([], [], m, color="grey", label=s)
    ax.set_yscale("log")
    ax.set_xlabel("spill throughput (MB/s, mean over repetitions, 95% CI)")
    ax.set_ylabel("critical-read p99 latency (ms, log scale, 95% bootstrap CI)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
