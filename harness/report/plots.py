"""Plots for reports (matplotlib, Agg): labelled axes with units, legends, nothing clipped."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig: "plt.Figure", path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def latency_cdf(series: dict[str, np.ndarray], path: Path, title: str, unit: str = "us",
                what: str = "reads") -> Path:
    """Empirical CDFs on a log latency axis, one line per series (e.g. per mode)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for label, values in series.items():
        v = np.sort(np.asarray(values, dtype=float))
        if v.size == 0:
            continue
        v = np.maximum(v, 1e-3)
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=f"{label} (n={v.size})")
    ax.set_xscale("log")
    ax.set_xlabel(f"latency ({unit}, log scale)")
    ax.set_ylabel(f"fraction of {what} completed")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def grouped_bars(groups: Sequence[str], series: dict[str, Sequence[float]], path: Path, title: str, ylabel: str,
                 errors: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None, log: bool = False) -> Path:
    """Bars per group (e.g. intent class) and series (e.g. baseline vs intent), with optional CI whiskers. NaN is
    missing data: no bar, an "n/a" mark at its place."""
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 * len(groups) + 2), 4.5))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    missing = []
    for i, (label, values) in enumerate(series.items()):
        vals = np.asarray(values, dtype=float)
        have = np.isfinite(vals)  # no data is no bar (and an "n/a" mark), never a zero-height bar
        xs = x + (i - (len(series) - 1) / 2) * width
        yerr = None
        if errors and label in errors:
            lo, hi = (np.asarray(e, dtype=float) for e in errors[label])
            yerr = np.vstack([np.clip(vals - lo, 0, None), np.clip(hi - vals, 0, None)])[:, have]
            yerr = np.nan_to_num(yerr)  # a bar without an interval: no whisker
        ax.bar(xs[have], vals[have], width, label=label, yerr=yerr, capsize=3, color=f"C{i}")
        missing += [(xs[j], f"C{i}") for j in np.flatnonzero(~have)]
    for xm, color in missing:
        ax.annotate("n/a", (xm, 0), xycoords=("data", "axes fraction"), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7, color=color, rotation=90)
    ax.set_xticks(x)
    ax.set_xticklabels(groups, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def log2_histogram(buckets: dict[str, dict[int, int]], path: Path, title: str, unit: str = "us") -> Path:
    """bcc-style log2 histograms: bucket k holds values in [2^k, 2^(k+1)); one bar series per key."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    keys = sorted({int(k) for h in buckets.values() for k in h})
    if not keys:
        keys = [0]
    x = np.arange(min(keys), max(keys) + 1)
    width = 0.8 / max(1, len(buckets))
    for i, (label, h) in enumerate(buckets.items()):
        counts = np.array([h.get(int(k), h.get(str(k), 0)) for k in x], dtype=float)
        ax.bar(x + (i - (len(buckets) - 1) / 2) * width, counts, width, label=f"{label} (n={int(counts.sum())})")
    ax.set_xticks(x)
    ax.set_xticklabels([_pow2_label(k, unit) for k in x], rotation=45, ha="right", fontsize=7)
    ax.set_xlabel(f"latency bucket ({unit}, log2)")
    ax.set_ylabel("requests")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def _pow2_label(k: int, unit: str) -> str:
    lo = 1 << int(k) if k >= 0 else 0
    return f"{lo}-{(1 << (int(k) + 1)) - 1}"


def pareto_scatter(points: list[tuple[str, float, float]], path: Path, title: str,
                   xlabel: str = "spill throughput (MB/s)", ylabel: str = "critical-read p99 (us)") -> Path:
    """Each (label, x, y); larger x and smaller y are better; the Pareto frontier is drawn and marked."""
    fig, ax = plt.subplots(figsize=(7.5, 5))
    front = pareto_front([(x, y) for _, x, y in points])
    for label, x, y in points:
        on = (x, y) in front
        ax.scatter([x], [y], s=60 if on else 30, marker="o" if on else "x", color="C3" if on else "C0")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if front:
        fx, fy = zip(*sorted(front))
        ax.plot(fx, fy, "--", color="C3", label="Pareto frontier")
        ax.legend(fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + " (log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points not dominated by another (higher-or-equal x and lower-or-equal y, one strictly)."""
    out = []
    for p in points:
        if not any((q[0] >= p[0] and q[1] <= p[1]) and q != p for q in points):
            out.append(p)
    return out
