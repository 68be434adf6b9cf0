"""`kvds net bench`: build the lab, run the anchor and the variants in alternating repetitions, file the run and
return its typed summary (cli.py parses the arguments into one NetConfig; render.py prints; harness/emit.py for
--json). The lab is journaled: the CLI's exit path, a signal or `kvds restore` removes it."""

from __future__ import annotations

import os
from typing import Any

from harness import doctor
from harness.errors import UserError
from harness.mapping import Mapping, load_mapping
from net_priority import anchor as anchormod, bench, lab as labmod
from net_priority.classes import bottleneck_plan, has_net_fields, role_sockopt, roles_of
from net_priority.config import BASELINE, UNLOADED, NetConfig, path_qdiscs
from net_priority.figures import variant_figures
from net_priority.procs import Commands
from net_priority.summary import BENCH_SCHEMA, NetBenchSummary
from harness.results import Filed, ResultStore

FIGURE = "latency.png"  # fetch latency CDF per variant, in the run directory
EBPF_NOTE = ("qdisc counters per HTB class from netlink (harness/knobs/qdisc.py) over each fetch window; with "
             "--ebpf, queue delay per socket priority from net:net_dev_queue -> net:net_dev_start_xmit and "
             "retransmits from tcp:tcp_retransmit_skb (ebpf/net_trace.py)")


def mappings_of(cfg: NetConfig) -> dict[str, Mapping]:
    """The mapping of each mapped variant; a mapping without network fields is refused (it would be the baseline)."""
    out: dict[str, Mapping] = {}
    for v in cfg.variants:
        if v in (UNLOADED, BASELINE):
            continue
        m = load_mapping(v)
        if not has_net_fields(m):
            raise UserError(f"mapping {v!r} has no network fields (net_priority, dscp, pacing_mbps, congestion) for "
                            "decode-critical or cold-spillable: it would run as the baseline")
        for role, rc in roles_of(m).items():
            role_sockopt(cfg, role, rc)  # net_priority on a tbf root: refused here, before anything exists
        out[v] = m
    return out


def needed_capabilities(cfg: NetConfig, mappings: dict[str, Mapping]) -> list[str]:
    caps = ["net.netns", "net.veth", f"net.qdisc.{cfg.qdisc}", *(f"net.qdisc.{k}" for k in path_qdiscs(cfg))]
    for m in mappings.values():
        for role in roles_of(m).values():
            if role.pacing_mbps is not None:
                caps.append("net.pacing")
            if role.congestion is not None:
                caps.append(f"net.cc.{role.congestion}")
    if cfg.anchor:
        caps += ["net.tools.sockperf", "net.tools.iperf3"]
    return list(dict.fromkeys(caps))


def run(cfg: NetConfig, echo: Any = None) -> Filed[NetBenchSummary]:
    cfg.check()
    mappings = mappings_of(cfg)
    doctor.require(*needed_capabilities(cfg, mappings))
    plan, filters = bottleneck_plan(cfg, mappings.values())
    lab = labmod.names()
    cmds = Commands(echo=echo)
    load0 = list(os.getloadavg())
    labmod.build(lab, cfg, plan, filters)
    anchor = anchormod.run(cfg, lab, cmds) if cfg.anchor else None
    make_trace = _trace_factory(lab) if cfg.ebpf else None
    results, order = bench.run_variants(cfg, lab, mappings, cmds, make_trace)
    config = {**cfg.as_dict(), "lab": lab.as_dict(), "htb_plan": [p.__dict__ for p in plan] if cfg.qdisc == "htb"
              else None, "dscp_filters": [f.__dict__ for f in filters], "loadavg_start": load0,
              "loadavg_end": list(os.getloadavg())}
    filed = ResultStore().new_run("net-bench", config)
    _write_samples(filed, results)
    unloaded, baseline = results.get(UNLOADED), results.get(BASELINE)
    variants = {}
    for name, reps in results.items():
        m = mappings.get(name)
        roles = roles_of(m)
        classes = {r: {"mapping": rc.as_dict(),
                       "sockopt": role_sockopt(cfg, r, rc)}
                   for r, rc in roles.items()}
        variants[name] = variant_figures(reps, unloaded, baseline, cfg.rate_mbit, bench.mapping_name(name), classes,
                                         cfg.step_ms).as_dict()
    summary = NetBenchSummary(BENCH_SCHEMA, config, [[r, n] for r, n in order], variants, anchor,
                              cmds.lines, EBPF_NOTE if cfg.ebpf else EBPF_NOTE.split("; with")[0])
    stored = summary.as_dict()
    filed.write_summary(stored)
    from net_priority import render

    render.cdf_png(stored, filed.path / FIGURE, {n: [r.latency_ns for r in reps] for n, reps in results.items()})
    return Filed(filed, NetBenchSummary.from_json(stored))


def _write_samples(filed: Any, results: dict[str, list[Any]]) -> None:
    """Raw per-fetch samples per variant and repetition (samples-<variant>.npz): percentiles can be recomputed."""
    import numpy as np

    for name, reps in results.items():
        arrays = {}
        for i, r in enumerate(reps):
            arrays[f"latency_ns_{i}"] = r.latency_ns
            arrays[f"service_ns_{i}"] = r.service_ns
            arrays[f"size_{i}"] = r.size
        np.savez_compressed(filed.path / f"samples-{name.replace('/', '_')}.npz", **arrays)


def _trace_factory(lab: labmod.Lab):
    from ebpf.net_trace import NetTrace  # the eBPF track's kernel-side view (a track may use another track)

    return lambda: NetTrace(ifname=lab.prefill_if, netns=lab.prefill_ns)
