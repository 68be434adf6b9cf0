"""The sweep's figure: decode-critical miss ratio against fast-tier size, one line per policy, MIN as the floor."""
from __future__ import annotations

import textwrap
from pathlib import Path

from kv_policy.registry import is_reference
from harness.report.plots import _save, plt
from harness.stats import Estimate


def sweep_png(by_fraction: dict[float, dict[str, Estimate]], metric: str, title: str, path: Path) -> Path:
    """Mean with 95% interval whiskers per policy; offline references dashed (MIN shaded below as the floor)."""
    fractions = sorted(by_fraction)
    policies = list(next(iter(by_fraction.values())))
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name in policies:
        ests = [by_fraction[f][name] for f in fractions]
        ys = [e.value for e in ests]
        lo = [e.value - e.lo if e.lo == e.lo else 0.0 for e in ests]
        hi = [e.hi - e.value if e.hi == e.hi else 0.0 for e in ests]
        ref = is_reference(name.split(":")[0])
        ax.errorbar(fractions, ys, yerr=[lo, hi], marker="o", capsize=3, linestyle="--" if ref else "-",
                    label=f"{name} (offline bound)" if ref else name)
        if name == "MIN":
            ax.fill_between(fractions, 0, ys, color="grey", alpha=0.15, label="below MIN: unreachable by eviction")
    ax.set_xlabel("fast tier (fraction of peak live KV bytes)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title("\n".join(textwrap.fill(line, 110) for line in title.splitlines()), fontsize=7)
    ax.legend(fontsize=8)
    return _save(fig, path)
