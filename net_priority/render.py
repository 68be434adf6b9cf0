"""`kvds net bench`'s text output and its figure (fetch latency CDF per variant): what was measured, precisely."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from harness.stats import verdict_from_dict


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def est(e: Mapping[str, Any] | None, digits: int = 0, scale: float = 1.0) -> str:
    """'123 [110, 140]', a point alone, or '-' with the reason."""
    if not e:
        return "-"
    v, lo, hi = e.get("value"), e.get("lo"), e.get("hi")
    if not _num(v):
        return f"- ({e.get('reason') or 'no data'})"
    f = f"{{:,.{digits}f}}"
    if _num(lo) and _num(hi):
        return f"{f.format(v * scale)} [{f.format(lo * scale)}, {f.format(hi * scale)}]"
    return f"{f.format(v * scale)} ({e.get('reason') or 'no interval'})"


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths))


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join([_row(head, widths), _row(["-" * w for w in widths], widths), *(_row(r, widths) for r in rows)])


def variants_table(summary: Mapping[str, Any]) -> str:
    head = ["variant", "fetches", "late", "p50 us", "p99 us", "p50 / unloaded", "p99 / unloaded", "bulk Mbit/s",
            "bulk / rate", "bulk kept"]
    rows = []
    for name, v in summary["variants"].items():
        lat = v["latency_us"]
        rows.append([name, f"{v['fetches']:,}", str(v["late_fetches"]), est(lat.get("p50")), est(lat.get("p99")),
                     est(v.get("interference_p50"), 2), est(v.get("interference_p99"), 2), est(v.get("bulk_mbit")),
                     est(v.get("bulk_share"), 3),
                     est(v.get("bulk_kept"), 3)])
    return table(head, rows)


def goals(summary: Mapping[str, Any]) -> list[str]:
    out = []
    for name, v in summary["variants"].items():
        g = v.get("goal")
        if g:
            out.append(f"  {name}: {g['status']}: " + "; ".join(verdict_from_dict(p) for p in g["parts"]))
    return out


def qdisc_lines(summary: Mapping[str, Any]) -> list[str]:
    out = []
    for name, v in summary["variants"].items():
        q = v.get("qdisc") or {}
        cells = [f"{c}: {d.get('bytes', 0) / 1e6:,.1f} MB, {d.get('drops', 0)} drops, {d.get('overlimits', 0)} "
                 "overlimits" for c, d in q.items() if c != "root" and d.get("bytes")]
        if cells:
            out.append(f"  {name}: " + "; ".join(cells))
    return out


def anchor_lines(a: Mapping[str, Any] | None) -> list[str]:
    if not a:
        return ["anchor: not run (--no-anchor)"]
    out = [f"anchor (same lab, same run; {a['reps']} alternating repetitions; {a['unit']}):"]
    for size, d in a["pingpong"].items():
        kv, sp = d["kvds_mean_us"], d["sockperf_avg_us"]
        out.append(f"  ping-pong {int(size):,} B: kvds {sum(kv) / len(kv):,.1f} us, "
                   f"sockperf {sum(sp) / len(sp):,.1f} us;"
                   f" {d['text']}")
    b = a.get("bulk")
    if b:
        ratio = b.get("kvds_over_iperf3")
        out.append(f"  bulk alone: kvds {b['kvds_mbit'] or 0:,.0f} Mbit/s, iperf3 {b['iperf3']['received_mbit']:,.0f} "
                   f"Mbit/s (ratio {ratio:.3f})" if ratio else "  bulk alone: -")
    ld = a.get("loaded")
    if ld:
        sp = ld["sockperf"]
        out.append(f"  loaded (one class): sockperf {ld['size']:,} B under iperf3 "
                   f"({ld['iperf3']['received_mbit']:,.0f} "
                   f"Mbit/s): avg {sp['avg_us']:,.1f} us, p99 {sp['percentiles_us'].get('p99', float('nan')):,.1f} us")
    return out


def path_line(cfg: Mapping[str, Any], lab: Mapping[str, Any]) -> str | None:
    """The path beyond the bottleneck (netem delay and loss, the classes' queue), None when it is the plain veth
    with pfifo leaves (runs from before these options have none of the keys)."""
    parts = []
    if cfg.get("classify") == "dscp":
        rules = ", ".join(f"dscp {f['dscp']} -> 1:{f['minor']:x}" for f in cfg.get("dscp_filters") or [])
        parts.append(f"HTB classes by DSCP (u32 filters on the root: {rules or 'none'}; no socket priority)")
    if cfg.get("rtt_ms"):
        parts.append(f"netem root on {lab['decode_if']} (the return path: requests and ACKs) delays every round trip "
                     f"{cfg['rtt_ms']:g} ms")
    if cfg.get("loss_pct"):
        parts.append(f"a netem leaf under each bottleneck class drops {cfg['loss_pct']:g} % of the data at random")
    elif cfg.get("leaf", "pfifo") != "pfifo":
        parts.append(f"each bottleneck class queues into {cfg['leaf']}")
    return "path: " + "; ".join(parts) if parts else None


def bench(summary: Mapping[str, Any], run_id: str | None = None) -> None:
    cfg = summary["config"]
    print(f"net bench{f' {run_id}' if run_id else ''}: {cfg['qdisc']} bottleneck {cfg['rate_mbit']:g} Mbit/s on "
          f"{cfg['lab']['prefill_if']} ({cfg['lab']['prefill_ns']} -> {cfg['lab']['decode_ns']}); fetches "
          f"{', '.join(f'{s // 1024}K' for s in cfg['sizes'])} every {cfg['step_ms']:g} ms "
          f"for {cfg['duration_s']:g} s, "
          f"{cfg['bulk_streams']} bulk streams; {cfg['reps']} repetitions per variant, alternating")
    if path := path_line(cfg, cfg["lab"]):
        print(path)
    print("fetch latency from the intended issue time (us); p99 / unloaded paired by repetition; bulk while fetching")
    print(variants_table(summary))
    g = goals(summary)
    if g:
        print("goal: fetch p99 <= 1.5 x unloaded and bulk >= 80% of the rate (verdicts from the 95% intervals)")
        print("\n".join(g))
    q = qdisc_lines(summary)
    if q:
        print("qdisc classes during the fetch windows:")
        print("\n".join(q))
    print("\n".join(anchor_lines(summary.get("anchor"))))


def dry_run(plan: Mapping[str, Any]) -> None:
    lab = plan["lab"]
    print(f"net bench plan (nothing changed): namespaces {lab['prefill_ns']} (prefill, {lab['prefill_addr']}) and "
          f"{lab['decode_ns']} (decode, {lab['decode_addr']}), veth {lab['prefill_if']} <-> {lab['decode_if']}; "
          "the run draws its own 4-hex tag in place of 0000")
    cfg = plan["config"]
    print(f"bottleneck: {plan['qdisc']} root on {lab['prefill_if']} at {cfg['rate_mbit']:g} Mbit/s")
    for c in plan.get("htb_classes") or []:
        print(f"  class 1:{c['minor']:x}  rate {c['rate_mbit']:g} Mbit/s  ceil {c['ceil_mbit']:g}  prio {c['prio']}")
    if path := path_line(cfg, lab):
        print(path)
    print(f"{plan['reps']} repetitions per variant, in this order: "
          + ", ".join(f"{v}#{r}" for r, v in plan["order"]))
    for name, v in plan["variants"].items():
        print(f"variant {name}: socket options {v['sockopt']}")
        for line in v["commands"]:
            print(f"  {line}")
    if plan.get("anchor"):
        print("anchor:")
        for line in plan["anchor"]:
            print(f"  {line}")


def cdf_png(summary: Mapping[str, Any], path: Path, samples: Mapping[str, list[Any]]) -> None:
    """Fetch latency CDF per variant (log x), pooled over repetitions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, groups in samples.items():
        x = np.sort(np.concatenate(groups).astype(float) / 1000.0)
        if x.size:
            ax.plot(x, np.arange(1, x.size + 1) / x.size, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("fetch latency from intended issue (us)")
    ax.set_ylabel("share of fetches")
    cfg = summary["config"]
    ax.set_title(f"KV fetches under bulk transfer, {cfg['qdisc']} {cfg['rate_mbit']:g} Mbit/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
