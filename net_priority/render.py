"""`kvds net bench`'s text output and its figure (fetch latency CDF per variant): what was measured, precisely."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from harness.report.fmt import estimate
from harness.stats import verdict_from_dict
from net_priority.summary import BenchPlan, BenchSummary, ReproSummary


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths))


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join([_row(head, widths), _row(["-" * w for w in widths], widths), *(_row(r, widths) for r in rows)])


def _stalled_cell(v: Mapping[str, Any]) -> str:
    return f"{v.get('stalled_reps', 0)}/{v['reps']}" if v.get("stalls") else "-"


def variants_table(summary: BenchSummary) -> str:
    head = ["variant", "fetches", "stalled", "e2e p50 us", "e2e p99 us", "wake-late p99 us", "network p99 us",
            "network p99 / unl.", "e2e p99 / unl.", "bulk / rate", "bulk kept"]
    rows = []
    for name, v in summary.variants.items():
        lat, net, wake = v["latency_us"], v.get("network_us") or {}, v.get("wake_late_us") or {}
        rows.append([name, f"{v['fetches']:,}", _stalled_cell(v), estimate(lat.get("p50")), estimate(lat.get("p99")),
                     estimate(wake.get("p99")), estimate(net.get("p99")), estimate(v.get("interference_p99_network")),
                     estimate(v.get("interference_p99")), estimate(v.get("bulk_share")), estimate(v.get("bulk_kept"))])
    return table(head, rows)


def stall_lines(summary: BenchSummary) -> list[str]:
    """Each stalled repetition with its evidence."""
    out = []
    for name, v in summary.variants.items():
        for i, st in enumerate(v.get("stalls") or []):
            if st and st.get("stalled"):
                runq = ", ".join(f"{k} {ms:g}" for k, ms in st["runq_ms"].items() if ms is not None)
                out.append(f"  {name} rep {i}: {st['why']} (run-queue ms: {runq}; largest wake-up lateness "
                           f"{st['max_wake_late_ms']:g} ms)")
    return out


def goals(summary: BenchSummary) -> list[str]:
    out = []
    for name, v in summary.variants.items():
        g = v.get("goal")
        if not g:
            continue
        line = f"  {name}: {g['status']}: " + "; ".join(verdict_from_dict(p) for p in g["parts"])
        free = v.get("goal_stall_free")
        if not v.get("stalls"):
            out.append(line + " (no stall evidence in this run)")
        elif free is None:
            out.append(line + " (rests on stall-free repetitions)")
        else:
            out.append(line + f" (includes stalled repetitions; on the {free.get('pairs')} stall-free pairs: "
                       f"{free['status']}: " + "; ".join(verdict_from_dict(p) for p in free["parts"]) + ")")
    return out


def qdisc_lines(summary: BenchSummary) -> list[str]:
    out = []
    for name, v in summary.variants.items():
        q = v.get("qdisc") or {}
        cells = [f"{c}: {d.get('bytes', 0) / 1e6:,.1f} MB, {d.get('drops', 0)} drops, {d.get('overlimits', 0)} "
                 "overlimits" for c, d in q.items() if c != "root" and d.get("bytes")]
        if cells:
            out.append(f"  {name}: " + "; ".join(cells))
    return out


def anchor_lines(a: Mapping[str, Any] | None) -> list[str]:
    if not a:
        return ["anchor: not run (--no-anchor; across two hosts it runs on one host's lab only)"]
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


def bench(summary: BenchSummary) -> None:
    cfg = summary.config
    print(f"net bench: {cfg['qdisc']} bottleneck {cfg['rate_mbit']:g} Mbit/s on "
          f"{cfg['lab']['prefill_if']} ({cfg['lab']['prefill_ns']} -> {cfg['lab']['decode_ns']}); fetches "
          f"{', '.join(f'{s // 1024}K' for s in cfg['sizes'])} every {cfg['step_ms']:g} ms "
          f"for {cfg['duration_s']:g} s, "
          f"{cfg['bulk_streams']} bulk streams; {cfg['reps']} repetitions per variant, alternating")
    if path := path_line(cfg, cfg["lab"]):
        print(path)
    print("per fetch (us): e2e = done - due; wake-late = issued - max(due, previous done) (the host's CPUs); network "
          "= done - sent (qdisc + wire + server); p99 / unloaded (unl.) paired by repetition; bulk while fetching")
    print(variants_table(summary))
    st = stall_lines(summary)
    if st:
        print(f"stalled repetitions (fetcher or fetch-server on a run queue, or a fetch woken, beyond "
              f"{summary.config.get('stall_ms', 10):g} ms):")
        print("\n".join(st))
    g = goals(summary)
    if g:
        clocks = {v.get("goal_clock") for v in summary.variants.values() if v.get("goal")}
        on = "network" if clocks == {"network"} else "e2e"
        print(f"goal: fetch {on} p99 <= 1.5 x unloaded and bulk >= 80% of the rate (verdicts from the 95% "
              "intervals; e2e beside it in the table)")
        print("\n".join(g))
    q = qdisc_lines(summary)
    if q:
        print("qdisc classes during the fetch windows:")
        print("\n".join(q))
    print("\n".join(anchor_lines(summary.anchor)))


def bench_dry_run(plan: BenchPlan) -> None:
    lab, cfg = plan.lab, plan.config
    if cfg.get("two_hosts"):
        print(f"net bench plan (nothing changed): two hosts, prefill {lab['prefill_ns']} (sender: the bottleneck on "
              f"its egress), decode {lab['decode_ns']} (data address {lab['decode_addr']}); every endpoint over ssh "
              "(net_priority/two_hosts.py)" + ("; the netns hosts and their wire built first (--netns-hosts)"
                                                if cfg["two_hosts"].get("netns_lab") else ""))
    else:
        print(f"net bench plan (nothing changed): namespaces {lab['prefill_ns']} (prefill, {lab['prefill_addr']}) "
              f"and {lab['decode_ns']} (decode, {lab['decode_addr']}), veth {lab['prefill_if']} <-> "
              f"{lab['decode_if']}; the run draws its own 4-hex tag in place of 0000")
    print(f"bottleneck: {plan.qdisc} root on {lab['prefill_if']} at {cfg['rate_mbit']:g} Mbit/s")
    for c in plan.htb_classes or []:
        print(f"  class 1:{c['minor']:x}  rate {c['rate_mbit']:g} Mbit/s  ceil {c['ceil_mbit']:g}  prio {c['prio']}")
    if path := path_line(cfg, lab):
        print(path)
    print(f"{plan.reps} repetitions per variant, in this order: "
          + ", ".join(f"{v}#{r}" for r, v in plan.order))
    for name, v in plan.variants.items():
        print(f"variant {name}: socket options {v['sockopt']}")
        for line in v["commands"]:
            print(f"  {line}")
    if plan.anchor:
        print("anchor:")
        for line in plan.anchor:
            print(f"  {line}")


def cdf_png(summary: BenchSummary, path: Path, samples: Mapping[str, list[Any]]) -> None:
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
    cfg = summary.config
    ax.set_title(f"KV fetches under bulk transfer, {cfg['qdisc']} {cfg['rate_mbit']:g} Mbit/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def repro(summary: ReproSummary) -> None:
    print(f"net repro: {len(summary.runs)} run(s) re-judged by today's rule "
          f"({', '.join(summary.runs)}){'; benched now: ' + ', '.join(summary.benched) if summary.benched else ''}")
    head = ["variant", *(r[:15] for r in summary.runs), "same"]
    rows = []
    for row in summary.rows:
        cells = []
        for c in row["cells"]:
            if c["status"] is None:
                cells.append("-")
                continue
            stalled = f", {c['stalled_reps']}/{c['reps']} stalled" if c["stalled_reps"] else ""
            free = f" (stall-free: {c['stall_free']})" if c["stall_free"] else ""
            cells.append(f"{c['status']} [{c['clock']}{stalled}]{free}")
        same = "-" if row["same"] is None else ("yes" if row["same"] else "no")
        rows.append([row["variant"], *cells, same])
    print(table(head, rows))
    for row in summary.rows:
        for c in row["cells"]:
            if c["text"]:
                print(f"  {row['variant']} {c['run']}: {c['text']}")
    print("prediction (model in net_priority/repro.py: paired log p99 ratios and bulk shares of the stall-free "
          "repetitions, normal across repetitions):")
    for name, p in summary.predict.items():
        if "chance" not in p:
            print(f"  {name}: - ({p['reason']})")
            continue
        ch = ", ".join(f"{s} {v:.2f}" for s, v in p["chance"].items())
        print(f"  {name}: a run of {p['reps']} repetitions: {ch}; {p['runs']} runs agree: {p['all_same']:.2f} "
              f"(from {p['pairs']} pairs; ratio x{math.exp(p['log_ratio_mean']):.3g}, log sd "
              f"{p['log_ratio_sd']:.3g}; share {p['share_mean']:.3f} sd {p['share_sd']:.3f})")
