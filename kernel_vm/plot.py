"""One PNG per bench run: per-class re-access p99 and pages swapped out, baseline vs intent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _num(x: Any) -> float:
    """None (strict JSON's missing) and NaN alike as NaN."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


def plot_summary(summary: dict[str, Any], out: Path) -> Path:
    from kernel_vm.mix import CLASSES

    raw = summary["variants"]
    first = [n for n in raw if n.split("@")[0] == summary.get("baseline")]
    variants = {n: raw[n] for n in first + [n for n in raw if n not in first]}  # baseline first
    present = next(iter(variants.values()))["classes"]
    classes = [c.value for c in CLASSES if c.value in present]  # decode order, not the JSON's key order
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (ax_lat, ax_sw) = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / len(variants)
    x = np.arange(len(classes))
    any_p99 = False
    for i, (vname, v) in enumerate(variants.items()):
        p99 = [v["classes"][c]["reaccess_us"]["p99"] for c in classes]
        val, lo, hi = (np.array([_num(e.get(k)) for e in p99]) for k in ("value", "lo", "hi"))
        have = np.isfinite(val) & (val > 0)  # a p99 with too few re-accesses beyond it: no bar, an "n/a" mark
        any_p99 = any_p99 or bool(have.any())
        err = np.nan_to_num(np.vstack([np.clip(val - lo, 0, None), np.clip(hi - val, 0, None)]))[:, have]
        ax_lat.bar((x + i * width)[have], val[have], width, yerr=err, capsize=3, label=vname,
                   color=colors[i % len(colors)])
        for xm in (x + i * width)[~have]:
            ax_lat.annotate("n/a", (xm, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=7, rotation=90)
        sw = [v["classes"][c]["swapped_out_pages"]["mean"]["value"] for c in classes]
        dropped = [v["classes"][c]["dropped_pages"]["mean"]["value"] for c in classes]
        pages = [v["classes"][c]["pages"] for c in classes]
        ax_sw.bar(x + i * width, 100 * np.array(sw) / np.array(pages), width, label=f"{vname} swapped",
                   color=colors[i % len(colors)])
        ax_sw.bar(x + i * width, 100 * np.array(dropped) / np.array(pages), width,
                  bottom=100 * np.array(sw) / np.array(pages), hatch="//", alpha=0.4,
                  label=f"{vname} dropped (DONTNEED)", color=colors[i % len(colors)])
    for ax in (ax_lat, ax_sw):
        ax.set_xticks(x + width * (len(variants) - 1) / 2, classes, rotation=20, ha="right")
        ax.legend(fontsize=8)
    if any_p99:  # a log axis needs one positive bar (a small arena may have no class with a supported p99)
        ax_lat.set_yscale("log")
    ax_lat.set_ylabel("first-touch re-access p99 (us, log; 95% CI)")
    ax_lat.set_title("re-access latency per class after the squeeze")
    ax_sw.set_ylabel("% of the class's pages after the squeeze")
    ax_sw.set_title("pages swapped out / dropped per class")
    sw = summary["swap"]
    fig.suptitle(f"kvds vm bench: swap={sw['kind']}, pressure={summary['pressure_pct']:g}%, reps={summary['reps']}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
