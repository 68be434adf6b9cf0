"""`kvds io sweep`: every (scheduler, mapping) point as spill MB/s against critical p99, Pareto frontier marked.

A point is better when its critical-read p99 is lower and its spill MB/s higher; a point is on the frontier
when no other point of the sweep is at least as good on both and better on one. The issue's goal: interference
factor (p99 / unloaded p99 under the same scheduler) <= 1.5 while the spill keeps >= 50% of the baseline MB/s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCHEMA = "kvds.io-sweep/1"
DEFAULT_MAPPINGS = ("ioprio-only", "throttle-only", "paced-only", "intent-paced", "paced-weighted")
# --quick (about a minute): one single-knob mapping and the two combined ones
QUICK_MAPPINGS = ("ioprio-only", "intent-paced", "paced-weighted")
GOAL_INTERFERENCE = 1.5
GOAL_RETAINED = 0.5


def points(per_sched: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for sched, doc in per_sched.items():
        for label, m in doc["modes"].items():
            if label == "unloaded":
                continue
            inter = m["interference_factor"]
            out.append({
                "scheduler": sched, "variant": label, "mapping": m["mapping"],
                "p99_us": m["latency_us"]["p99"], "p50_us": m["latency_us"]["p50"],
                "interference_factor": inter, "spill_mb_s": m["spill_mb_s"], "spill_retained": m["spill_retained"],
                "overlap": m.get("overlap"),
                "meets_goal": bool(inter and m["spill_retained"] is not None
                                   and inter["value"] <= GOAL_INTERFERENCE and m["spill_retained"] >= GOAL_RETAINED),
            })
    for p in out:
        p["pareto"] = not any(_dominates(q, p) for q in out if q is not p)
    return out


def _dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ap, bp = a["p99_us"]["value"], b["p99_us"]["value"]
    am, bm = a["spill_mb_s"]["value"], b["spill_mb_s"]["value"]
    return ap <= bp and am >= bm and (ap < bp or am > bm)


def goal_summary(pts: list[dict[str, Any]], per_sched: dict[str, Any] | None = None) -> dict[str, Any]:
    """Who met the goal; and the two yardsticks that say whether it was reachable: the unloaded reference's
    own spread (max / min of its per-repetition p99: above 1.5, the reference cannot even match itself) and
    the best clean-read interference among separated points keeping >= 50% of the spill (reads no write
    touched; the baseline's clean reads are mostly the backlog read after its writer stopped)."""
    spread = {}
    for sched, doc in (per_sched or {}).items():
        per_rep = [x for x in doc["modes"].get("unloaded", {}).get("per_rep_p99_us", []) if x]
        spread[sched] = max(per_rep) / min(per_rep) if len(per_rep) > 1 else None
    # A point "meets" the goal against a reference that does not reproduce itself within the goal (one slow
    # unloaded repetition inflates the denominator): listed apart, not claimed.
    unstable = {s for s, sp in spread.items() if sp is not None and sp > GOAL_INTERFERENCE}
    met = [f"{p['scheduler']}/{p['variant']}" for p in pts if p["meets_goal"] and p["scheduler"] not in unstable]
    met_unstable = [f"{p['scheduler']}/{p['variant']}" for p in pts if p["meets_goal"] and p["scheduler"] in unstable]
    clean = [(p["overlap"]["clean_interference_factor"]["value"], f"{p['scheduler']}/{p['variant']}")
             for p in pts if p["variant"] != "baseline" and p.get("overlap")
             and p["overlap"].get("clean_interference_factor")
             and p["spill_retained"] is not None and p["spill_retained"] >= GOAL_RETAINED]
    best = min(clean) if clean else None
    return {"interference_max": GOAL_INTERFERENCE, "spill_retained_min": GOAL_RETAINED, "met_by": met,
            "met_against_unstable_reference": met_unstable, "unloaded_p99_spread": spread,
            "best_clean_interference": {"value": best[0], "point": best[1]} if best else None}


def print_points(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from io_priority.bench import fmt_est

    t = Table(title="kvds io sweep: critical-read p99 vs spill MB/s (* = Pareto frontier, goal: IF <= 1.5 and "
                    "spill >= 50% of baseline)")
    for col in ("scheduler", "variant", "p99 us [95% CI]", "interference", "spill MB/s [95% CI]", "retained",
                "clean reads", "clean-read interference", "Pareto", "goal"):
        t.add_column(col)
    for p in sorted(summary["points"], key=lambda p: (p["scheduler"], p["p99_us"]["value"])):
        ov = p.get("overlap") or {}
        t.add_row(p["scheduler"], p["variant"], fmt_est(p["p99_us"]), fmt_est(p["interference_factor"], "x", 1),
                  fmt_est(p["spill_mb_s"]), f"{p['spill_retained']:.0%}" if p["spill_retained"] is not None else "-",
                  f"{ov['clean_fraction']:.0%}" if ov.get("clean_fraction") is not None else "-",
                  fmt_est(ov.get("clean_interference_factor"), "x", 1),
                  "*" if p["pareto"] else "", "yes" if p["meets_goal"] else "")
    Console(width=200).print(t)
    for sched, doc in summary["schedulers"].items():
        u = doc["modes"]["unloaded"]["latency_us"]
        print(f"unloaded reference under {sched}: p50 {u['p50']['value']:.0f} us, p99 {fmt_est(u['p99'], ' us')}")
    for sched, doc in summary["schedulers"].items():
        for label, m in doc["modes"].items():
            wp = m.get("write_priority")
            if wp and wp.get("note"):
                print(f"{sched}/{label}: {wp['note']}")
    print("clean reads: no spill write in flight at issue nor submitted during the read (ioload --ctx-out); "
          "their interference is what pacing cannot remove")
    goal = summary["goal"]
    met = goal["met_by"]
    print("goal met by: " + (", ".join(met) if met else "no point of this sweep"))
    if goal.get("met_against_unstable_reference"):
        print("within the goal's numbers but against an unloaded reference that varied by more than 1.5x between "
              "repetitions (not claimed): " + ", ".join(goal["met_against_unstable_reference"]))
    for sched, sp in goal.get("unloaded_p99_spread", {}).items():
        if sp:
            print(f"unloaded reference under {sched}: per-repetition p99 spread (max/min) {sp:.2f}"
                  + (" > 1.5: the reference does not reproduce itself within the goal" if sp > GOAL_INTERFERENCE else ""))
    best = goal.get("best_clean_interference")
    if best:
        print(f"best clean-read interference with >= 50% spill kept: {best['value']:.2f}x ({best['point']})"
              + (": interference the pacer cannot see" if best["value"] > GOAL_INTERFERENCE else ""))


def _err(e: dict[str, Any], scale: float = 1.0) -> list[list[float]] | None:
    """matplotlib's asymmetric error bar from an interval; None when the interval is missing."""
    lo, hi = e.get("lo"), e.get("hi")
    if lo is None or hi is None or lo != lo or hi != hi:
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
    for p in pts:
        x, y = p["spill_mb_s"], p["p99_us"]
        ax.errorbar(x["value"], y["value"] / 1e3, xerr=_err(x), yerr=_err(y, 1e3),
                    fmt=markers.get(p["scheduler"], "o"), color=colors[p["variant"]], ms=9, capsize=3,
                    mec="black" if p["pareto"] else colors[p["variant"]], mew=2 if p["pareto"] else 1)
        ax.annotate(f"{p['scheduler']}/{p['variant']}", (x["value"], y["value"] / 1e3), fontsize=7,
                    xytext=(5, 4), textcoords="offset points")
    front = sorted((p for p in pts if p["pareto"]), key=lambda p: p["spill_mb_s"]["value"])
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
