"""One repetition of one variant on the lab, and the alternating schedule of all of them: the fetcher's open loop
against the prefill side's fetch server while (except for `unloaded`) the bulk mover streams over the same
bottleneck. Kernel-side counters (qdisc classes, optional eBPF) are read around the fetch window only."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from harness import stats
from net_priority.classes import BASE_MINOR, RoleClass, bottleneck_plan, role_sockopt, roles_of
from net_priority.config import BASELINE, UNLOADED, NetSetup
from net_priority.estimates import RepSamples
from net_priority.fetch_clocks import rep_samples
from net_priority.veth_lab import BULK_PORT, FETCH_PORT, Lab
from net_priority.procs import READY_TIMEOUT_S, Commands, EndpointFailed
from net_priority.sites import Sites
from harness.progress import progress

BULK_INTERVAL_MS = 100
COUNTERS = ("bytes", "packets", "drops", "overlimits", "requeues")


def sockopt_text(cfg: NetSetup, role: str, rc: RoleClass) -> str:
    from net_priority.sockopts import SocketClass

    return str(SocketClass(**role_sockopt(cfg, role, rc)))


def _delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Per class, the counters' growth over the fetch window (and the qdisc's own under 'root')."""
    out: dict[str, Any] = {}
    pairs = [("root", before.get("qdisc", {}), after.get("qdisc", {}))]
    pairs += [(c, before.get("classes", {}).get(c, {}), v) for c, v in after.get("classes", {}).items()]
    # a class's leaf queue (fq, netem) under "<class> <kind>": a netem leaf's random losses are its drops
    pairs += [(f"{v['parent']} {v['kind']}", before.get("leaves", {}).get(h, {}), v)
              for h, v in after.get("leaves", {}).items()]
    for name, b, a in pairs:
        out[name] = {k: a.get(k, 0) - b.get(k, 0) for k in COUNTERS if k in a}
    return out


def bulk_mbit(data: bytes | None, t0_ns: int, t1_ns: int) -> float | None:
    """Bulk throughput over the whole intervals inside [t0, t1], from the receiver's result file (per-stream,
    per-interval byte counts: bytes[s, b] = stream s during [t0_ns + b * interval_ns, + interval_ns)). t0 and t1 are
    the fetcher's clocks: it runs on the receiver's host (CLOCK_MONOTONIC is one clock for every namespace of a
    host, not across hosts)."""
    if data is None:
        return None
    with np.load(io.BytesIO(data)) as z:
        b, start, step = z["bytes"], int(z["t0_ns"]), int(z["interval_ns"])
    per = b.sum(axis=0) if b.ndim > 1 else b
    first = max(0, -(-(t0_ns - start) // step))       # the first interval that starts at or after t0
    last = min(per.size, (t1_ns - start) // step)      # the intervals that end by t1
    if last <= first:
        return None
    return float(per[first:last].sum()) * 8 / 1e6 / ((last - first) * step / 1e9)


def ebpf_brief(doc: dict[str, Any], dscp_class: Mapping[int, str] | None = None) -> dict[str, Any]:
    """Per queue key, its HTB class: skbs, bytes, mean / max qdisc delay and the p50 / p99 bucket bounds (ns);
    retransmits per socket priority; events the ring lost. The key is the socket priority (a class id), or under
    `--classify dscp` the packet's DSCP, whose class `dscp_class` names (the u32 filters; unfiltered marks go to
    the default class)."""
    by_dscp = doc.get("key") == "dscp"
    q = {}
    for p, d in doc.get("queue_delay_ns", {}).items():
        row = {k: d.get(k) for k in ("class", "count", "bytes", "mean_ns", "max_ns", "p50_ns", "p99_ns")}
        if by_dscp:
            row["dscp"] = int(p) if int(p) < 64 else None  # 0xffff: not IPv4
            row["class"] = (dscp_class or {}).get(int(p), f"1:{BASE_MINOR:x}") if int(p) < 64 else None
        q[str(p)] = row
    r = {str(p): d for p, d in doc.get("retransmits", {}).get("by_priority", {}).items()}
    return {"queue_delay_ns": q, "key": doc.get("key", "priority"), "retransmits": r,
            "missed_events": doc.get("missed_events"), "hook": doc.get("hook")}


def fetcher_timeout_s(cfg: NetSetup) -> float:
    """How long a fetcher may take, start-up included, before the repetition is an error. Generous: open loop, a
    fetcher behind a bloated queue issues its late fetches back to back and ends when the last is served (in the
    TCG guest lab at 100 Mbit/s the baseline's fetches took 283 ms each at a 50 ms step)."""
    return cfg.duration_s * 20 + 60


def wait_bulk_flowing(sites: Sites, sender: Any, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Return once the bottleneck's byte counter grows by a full GSO skb: the bulk mover is sending (its process
    start-up is not part of the warm-up, however long it takes)."""
    t_end = time.monotonic() + timeout_s
    first = sites.stats()["qdisc"]["bytes"]
    while sites.stats()["qdisc"]["bytes"] - first < 64 * 1024:
        if sender.poll() is not None:
            err = (sender.stderr.read() or "").strip().splitlines() if sender.stderr else []
            raise EndpointFailed(f"net bulk-sender exited {sender.returncode} before sending: "
                                 f"{err[-1] if err else 'no message'}")
        if time.monotonic() > t_end:
            raise EndpointFailed(f"the bulk mover sent nothing through {sites.lab.prefill_if} within {timeout_s:g} s")
        time.sleep(0.05)


def rep_endpoints(cfg: NetSetup, lab: Lab, roles: dict[str, RoleClass], rep: int, fetch_out: Path,
                  bulk_out: Path) -> dict[str, tuple[str, list[str]]]:
    """Per endpoint role, (namespace, its arguments) for one repetition: one pure function, so `--dry-run` shows
    exactly what a run starts."""
    # the sender is stopped (SIGTERM) as soon as the fetcher is done: its own limit only has to outlast the
    # fetcher's start-up and window (seconds per Python process in the TCG guest lab, not 0.1 s as here)
    total = cfg.warmup_s + fetcher_timeout_s(cfg) + 1.0
    return {
        "fetch-server": (lab.prefill_ns, ["--bind", f"{lab.prefill_ip}:{FETCH_PORT}",
                                          "--sockopt", sockopt_text(cfg, "fetch", roles["fetch"])]),
        "bulk-receiver": (lab.decode_ns, ["--bind", f"{lab.decode_ip}:{BULK_PORT}", "--out", str(bulk_out),
                                          "--interval-ms", str(BULK_INTERVAL_MS)]),
        "bulk-sender": (lab.prefill_ns, ["--connect", f"{lab.decode_ip}:{BULK_PORT}",
                                         "--streams", str(cfg.bulk_streams), "--chunk", str(cfg.bulk_chunk),
                                         "--duration", f"{total:g}",
                                         "--sockopt", sockopt_text(cfg, "bulk", roles["bulk"])]),
        "fetcher": (lab.decode_ns, ["--connect", f"{lab.prefill_ip}:{FETCH_PORT}",
                                    "--sizes", ",".join(str(s) for s in cfg.sizes), "--step-ms", f"{cfg.step_ms:g}",
                                    "--duration", f"{cfg.duration_s:g}", "--out", str(fetch_out),
                                    "--sockopt", sockopt_text(cfg, "fetch", roles["fetch"]),
                                    "--seed", str(cfg.seed + rep)]),
    }


def run_rep(cfg: NetSetup, sites: Sites, roles: dict[str, RoleClass], loaded: bool, rep: int, work: Path,
            cmds: Commands, trace: Any = None, dscp_class: Mapping[int, str] | None = None) -> RepSamples:
    lab = sites.lab
    tag = f"{rep}-{time.monotonic_ns()}"
    fetch_out, bulk_out = work / f"fetch-{tag}.npz", work / f"bulk-{tag}.npz"
    ep = rep_endpoints(cfg, lab, roles, rep, fetch_out, bulk_out)
    server = sites.start(ep["fetch-server"][0], "fetch-server", ep["fetch-server"][1], cmds, wait_ready=True,
                         rt=cfg.fetch_rt)
    receiver = sender = None
    try:
        if loaded:
            receiver = sites.start(ep["bulk-receiver"][0], "bulk-receiver", ep["bulk-receiver"][1], cmds,
                                   wait_ready=True)
            sender = sites.start(ep["bulk-sender"][0], "bulk-sender", ep["bulk-sender"][1], cmds)
            wait_bulk_flowing(sites, sender)
            time.sleep(cfg.warmup_s)
        before = sites.stats()
        others = {"fetch-server": server, "bulk-sender": sender, "bulk-receiver": receiver}
        runq0 = {k: sites.runq(p) for k, p in others.items() if p is not None}
        if trace is not None:
            trace.start()
        fetcher = sites.start(ep["fetcher"][0], "fetcher", ep["fetcher"][1], cmds, rt=cfg.fetch_rt)
        sites.finish(fetcher, "net fetcher", fetcher_timeout_s(cfg))
        runq1 = {k: sites.runq(others[k]) for k in runq0}
        ebpf = ebpf_brief(trace.stop(), dscp_class) if trace is not None else None
        after = sites.stats()
    finally:
        if sender is not None:
            sites.stop(sender, "net bulk-sender")
        if receiver is not None:
            sites.stop(receiver, "net bulk-receiver")
        sites.stop(server, "net fetch-server")
    data = sites.load(lab.decode_ns, fetch_out)
    if data is None:
        raise EndpointFailed(f"the net fetcher left no result file {fetch_out}")
    with np.load(io.BytesIO(data)) as z:
        w = int(z["warmup"])  # the leading warm-up fetches (the connection's first round trips) are not measured
        clocks = {k: z[k] for k in ("intended_ns", "issue_ns", "sent_ns", "first_ns", "done_ns", "size")}
        fetcher_runq = int(z["runq_wait_ns"])
    runq = {k: (runq1[k] - runq0[k] if runq0[k] is not None and runq1[k] is not None else None) for k in runq0}
    runq["fetcher"] = fetcher_runq if fetcher_runq >= 0 else None
    window = (int(clocks["intended_ns"][w]), int(clocks["done_ns"][-1])) if clocks["done_ns"].size > w else (0, 0)
    bulk = bulk_mbit(sites.load(lab.decode_ns, bulk_out), *window) if loaded else None
    return rep_samples(clocks, w, cfg.step_ms, cfg.stall_ms, runq, bulk_mbit=bulk, qdisc=_delta(before, after),
                       ebpf=ebpf)


def run_variants(cfg: NetSetup, sites: Sites, mappings: dict[str, Any], cmds: Commands,
                 make_trace: Callable[[], Any] | None = None) -> tuple[dict[str, list[RepSamples]],
                                                                        list[tuple[int, str]]]:
    """Every variant `reps` times in alternating (ABBA) order; per variant its repetitions in order."""
    order = stats.alternating_order(list(cfg.variants), cfg.reps)
    dscp_class = {f.dscp: f"1:{f.minor:x}" for f in bottleneck_plan(cfg, mappings.values())[1]}
    out: dict[str, list[RepSamples]] = {v: [] for v in cfg.variants}
    with sites.scratch() as work, progress("net bench", total=len(order)) as bar:
        for rep, name in order:
            roles = roles_of(mappings.get(name))
            loaded = name != UNLOADED
            trace = make_trace() if make_trace is not None else None
            out[name].append(run_rep(cfg, sites, roles, loaded, rep, work, cmds, trace, dscp_class))
            bar.advance(1)
    return out, order


def mapping_name(variant: str) -> str | None:
    return None if variant in (UNLOADED, BASELINE) else variant
