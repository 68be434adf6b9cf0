"""`kvds net bench --dry-run`: what a run would create and start, without root and without changing anything: the
lab's names, the bottleneck and its classes, each variant's socket options and the endpoint and tool command lines
of its first repetition (built by the same functions the run uses)."""

from __future__ import annotations

import sys

from net_priority import two_hosts, veth_lab as labmod, tools
from net_priority.anchor import BULK_S, PINGPONG_S
from net_priority.bench import rep_endpoints
from net_priority.classes import bottleneck_plan, mappings_of, role_sockopt, roles_of
from net_priority.config import UNLOADED, NetSetup
from net_priority.veth_lab import IPERF_PORT, SOCKPERF_PORT
from net_priority.procs import endpoint_argv
from net_priority.summary import DRY_RUN_SCHEMA, BenchPlan

def plan(cfg: NetSetup) -> BenchPlan:
    cfg.check()
    mappings = mappings_of(cfg)
    lab = labmod.names("0000") if cfg.two_hosts is None else two_hosts.planned_lab(cfg.two_hosts, "0000")
    plan, filters = bottleneck_plan(cfg, mappings.values())
    classes = [p.__dict__ for p in plan] if cfg.qdisc == "htb" else None
    variants = {}
    for name in cfg.variants:
        roles = roles_of(mappings.get(name))
        ep = rep_endpoints(cfg, lab, roles, 0, lab.work_dir / "fetch-0.npz", lab.work_dir / "bulk-0.npz")
        order = ["fetch-server", "bulk-receiver", "bulk-sender", "fetcher"] if name != UNLOADED else \
            ["fetch-server", "fetcher"]
        variants[name] = {"sockopt": {r: role_sockopt(cfg, r, rc) for r, rc in roles.items()},
                          "commands": [_command(cfg, ep[r][0], r, ep[r][1]) for r in order]}
    anchor = None
    if cfg.anchor:
        anchor = [" ".join(["ip", "netns", "exec", lab.prefill_ns, *tools.sockperf_server(lab.prefill_ip,
                                                                                           SOCKPERF_PORT)]),
                  " ".join(["ip", "netns", "exec", lab.decode_ns,
                            *tools.sockperf_pingpong(lab.prefill_ip, SOCKPERF_PORT, cfg.anchor_size, PINGPONG_S)]),
                  " ".join(["ip", "netns", "exec", lab.decode_ns, *tools.iperf3_server(lab.decode_ip, IPERF_PORT)]),
                  " ".join(["ip", "netns", "exec", lab.prefill_ns,
                            *tools.iperf3_client(lab.decode_ip, IPERF_PORT, cfg.bulk_streams, BULK_S)])]
    return BenchPlan(DRY_RUN_SCHEMA, {**cfg.as_dict(), "dscp_filters": [f.__dict__ for f in filters]}, lab.as_dict(),
                        cfg.qdisc, classes, variants, anchor, reps=cfg.reps, order=[[r, v] for r, v in _order(cfg)])


def _command(cfg: NetSetup, where: str, role: str, args: list[str]) -> str:
    if cfg.two_hosts is None:
        return " ".join(endpoint_argv(where, role, args, cfg.fetch_rt))
    python = cfg.two_hosts.python or sys.executable
    return f"ssh {where} " + two_hosts.endpoint_command(python, role, args, cfg.fetch_rt)


def _order(cfg: NetSetup) -> list[tuple[int, str]]:
    from harness.stats import alternating_order

    return alternating_order(list(cfg.variants), cfg.reps)
