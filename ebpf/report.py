"""Text output of a recording: biolatency-style histograms, reclaim per cgroup, fault counts, delays."""

from __future__ import annotations

from typing import Any

from ebpf import hist as H
from ebpf.programs import BLK_KINDS

KIND_TITLES = {"issue_to_complete": "issue -> complete (device service time)",
               "insert_to_issue": "insert -> issue (time queued in the scheduler)"}


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def format_accounting(acct: dict[str, Any]) -> list[str]:
    """One line per device, class and op: how many requests were timed and what happened to the others."""
    lines = []
    for dev, classes in sorted(acct.items()):
        for cls, ops in sorted(classes.items()):
            for op, c in sorted(ops.items()):
                rest = ", ".join(f"{n} {what}" for what, n in c.items() if what != "timed" and n)
                lines.append(f"  {dev} class={cls} op={op}: {c['timed']} timed" + (f", {rest}" if rest else ""))
    if lines:
        lines.insert(0, "\nblk requests accounted (issued = timed + unfinished + overwritten + lost; "
                        "untimed: completions seen without their issue)")
    return lines


def format_results(res: dict[str, Any], top: int = 10) -> str:
    out: list[str] = []
    if res.get("load_attach_s") is not None:
        out.append(f"probes {','.join(res['probes'])}: loaded+attached in {res['load_attach_s']:.3f} s; "
                   f"recorded {res['duration_s']:.3f} s")
    missed = {tp: n for tp, n in (res.get("missed_events") or {}).items() if n}
    if missed:
        out.append("events the kernel did not run our programs for (another BPF program was running on that CPU; "
                   "all devices and tasks): " + ", ".join(f"{tp} {n}" for tp, n in missed.items()))
    blk = res.get("blk")
    if blk is not None:
        for kind in BLK_KINDS:
            any_hist = False
            for dev, classes in sorted(blk[kind].items()):
                for cls, ops in sorted(classes.items()):
                    for op, h in sorted(ops.items()):
                        if h["count"]:
                            any_hist = True
                            title = (f"\nblk {KIND_TITLES[kind]}: {dev} ({blk['devices'].get(dev, '')}) "
                                     f"class={cls} op={op}")
                            out.append(H.format_log2(h, title))
            if not any_hist:
                out.append(f"\nblk {KIND_TITLES[kind]}: no requests")
        out.extend(format_accounting(blk.get("accounting", {})))
    rc = res.get("reclaim")
    if rc is not None:
        for kind, h in rc["latency"].items():
            out.append(H.format_log2(h, f"\nreclaim {kind} (begin -> end)") if h["count"]
                       else f"\nreclaim {kind}: no events")
        for cg, kinds in sorted(rc["by_cgroup"].items()):
            for kind, agg in kinds.items():
                out.append(f"  cgroup {cg} {kind}: {agg['count']} reclaims, {_ms(agg['total_ns'])} total, "
                           f"{agg['pages_reclaimed']} pages reclaimed")
        rows = sorted(rc["by_pid"].items(), key=lambda kv: -sum(
            kv[1].get(k, {}).get("total_ns", 0) for k in ("direct", "memcg")))[:top]
        for pid, rec in rows:
            parts = [f"{k} {rec[k]['count']}x {_ms(rec[k]['total_ns'])} {rec[k]['pages_reclaimed']} pages"
                     for k in ("direct", "memcg") if k in rec]
            out.append(f"  pid {pid} ({rec['comm']}, {rec['memory_cgroup']}): " + "; ".join(parts))
    f = res.get("faults")
    if f is not None:
        out.append(f"\npage faults ({f['note']})")
        for kind, n in sorted(f["totals"].items(), key=lambda kv: -kv[1]):
            out.append(f"  {kind:<24} {n}")
        for pid, rec in sorted(f["by_pid"].items(), key=lambda kv: -kv[1]["total"])[:top]:
            out.append(f"  pid {pid:>7} {rec['comm']:<16} total {rec['total']:<9} user {rec['user']} "
                       f"kernel {rec['kernel']}")
    d = res.get("delays")
    if d is not None:
        out.append(f"\ndelay accounting ({d['source']}), per process: count / total")
        rows = sorted(d["by_pid"].items(), key=lambda kv: -sum(
            kv[1][k]["delay_ns"] for k in ("swapin", "blkio", "reclaim", "thrashing")))[:top]
        for pid, rec in rows:
            cells = "  ".join(f"{k} {rec[k]['count']}/{_ms(rec[k]['delay_ns'])}"
                              for k in ("swapin", "blkio", "reclaim", "thrashing", "cpu"))
            out.append(f"  pid {pid:>7} {rec['comm']:<16} {cells}")
        if not rows:
            out.append("  no delays")
        if d["exited_unreported"]:
            out.append(f"  reaped before the end, not reported: {d['exited_unreported']}")
    return "\n".join(out).lstrip("\n")
