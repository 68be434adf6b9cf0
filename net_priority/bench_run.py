"""`kvds net bench`: its config (BenchConfig: cli.py's `config` builds it from the arguments and checks it) and
its run: build the lab, run the anchor and the variants in alternating repetitions, file the run and return its
typed summary (render.bench prints it; harness/emit.py for --json). `dry_run` is the same config's plan, nothing
changed. The lab is journaled: the CLI's exit path, a signal or `kvds restore` removes it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from harness import doctor
from harness.progress import say
from harness.results import Filed, ResultStore
from net_priority import anchor as anchormod, bench, veth_lab as labmod
from net_priority.classes import bottleneck_plan, mappings_of, needed_capabilities, role_sockopt, roles_of
from net_priority.config import BASELINE, UNLOADED, NetSetup
from net_priority.estimates import variant_figures
from net_priority.procs import Commands
from net_priority.sites import LocalSites
from net_priority.summary import BENCH_SCHEMA, BenchPlan, BenchSummary

@dataclass(frozen=True)
class BenchConfig(NetSetup):
    """`kvds net bench`'s config: the setup (net_priority/config.py) and how the command reports as it runs."""
    verbose: bool = False                # print each command kvds starts


FIGURE = "latency.png"  # fetch latency CDF per variant, in the run directory
EBPF_NOTE = ("qdisc counters per HTB class from netlink (harness/knobs/qdisc.py) over each fetch window; with "
             "--ebpf, queue delay per socket priority (per DSCP under --classify dscp) from net:net_dev_queue -> "
             "net:net_dev_start_xmit and "
             "retransmits from tcp:tcp_retransmit_skb (ebpf/net_trace.py)")


def run(cfg: BenchConfig) -> Filed[BenchSummary]:
    cfg.check()
    echo = say if cfg.verbose else None
    mappings = mappings_of(cfg)
    if cfg.two_hosts is None:  # two hosts: the link agent reports what the sender lacks
        doctor.require(*needed_capabilities(cfg, mappings))
    plan, filters = bottleneck_plan(cfg, mappings.values())
    cmds = Commands(echo=echo)
    load0 = list(os.getloadavg())
    if cfg.two_hosts is not None:
        from net_priority import two_hosts

        with two_hosts.opened(cfg, plan, filters, cmds, labmod.names().tag) as remote:
            lab, anchor = remote.lab, None
            results, order = bench.run_variants(cfg, remote, mappings, cmds)
    else:
        lab = labmod.names()
        labmod.build(lab, cfg, plan, filters)
        anchor = anchormod.run(cfg, lab, cmds) if cfg.anchor else None
        make_trace = _trace_factory(lab, cfg.classify) if cfg.ebpf else None
        results, order = bench.run_variants(cfg, LocalSites(lab), mappings, cmds, make_trace)
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
    summary = BenchSummary(BENCH_SCHEMA, config, [[r, n] for r, n in order], variants, anchor,
                              cmds.lines, EBPF_NOTE if cfg.ebpf else EBPF_NOTE.split("; with")[0])
    stored = summary.as_dict()
    filed.write_summary(stored)
    from net_priority import render

    render.cdf_png(summary, filed.path / FIGURE, {n: [r.latency_ns for r in reps] for n, reps in results.items()})
    return Filed(filed, BenchSummary.from_json(stored))


def dry_run(cfg: BenchConfig) -> Filed[BenchPlan]:
    """`--dry-run`: what a run would create and start (net_priority/dry_run.py); files nothing."""
    from net_priority import dry_run as plan

    return Filed(None, plan.plan(cfg))


def _write_samples(filed: Any, results: dict[str, list[Any]]) -> None:
    """Raw per-fetch samples per variant and repetition (samples-<variant>.npz: e2e, service, size, network time,
    wake-up lateness): percentiles can be recomputed and the goal re-judged (`kvds net repro`)."""
    import numpy as np

    for name, reps in results.items():
        arrays = {}
        for i, r in enumerate(reps):
            arrays[f"latency_ns_{i}"] = r.latency_ns
            arrays[f"service_ns_{i}"] = r.service_ns
            arrays[f"size_{i}"] = r.size
            if r.network_ns is not None and r.wake_late_ns is not None:
                arrays[f"network_ns_{i}"] = r.network_ns
                arrays[f"wake_late_ns_{i}"] = r.wake_late_ns
        np.savez_compressed(filed.path / f"samples-{name.replace('/', '_')}.npz", **arrays)


def _trace_factory(lab: labmod.Lab, classify: str):
    from ebpf.net_trace import NetTrace  # the eBPF track's kernel-side view (a track may use another track)

    key = "dscp" if classify == "dscp" else "priority"  # what the bottleneck classifies by
    return lambda: NetTrace(ifname=lab.prefill_if, netns=lab.prefill_ns, key=key)
