"""The two-host lab on this machine: a prefill and a decode network namespace joined by one veth pair, the
bottleneck qdisc on the prefill side's egress (its classes' queues: pfifo, fq, or netem for random loss), and, for
a round-trip delay, a netem root on the decode side's egress (requests and ACKs: every round trip crosses it once,
and the classified data path keeps its one bottleneck). Everything is created through the knob journal
(harness/knobs), so a normal exit, an error, a signal and `kvds restore` after SIGKILL all remove it."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from net_priority.classes import BASE_MINOR, DscpFilter, HtbPlan
from net_priority.config import NetSetup

FETCH_PORT, BULK_PORT, PINGPONG_PORT, SOCKPERF_PORT, IPERF_PORT = 7301, 7302, 7303, 7304, 7305
TBF_LATENCY_MS = 50.0


@dataclass(frozen=True)
class Lab:
    """Names and addresses of one lab; `prefill` sends (KV answers, bulk), `decode` fetches and receives."""
    tag: str
    prefill_ns: str
    decode_ns: str
    prefill_if: str
    decode_if: str
    prefill_addr: str      # with prefix, e.g. 10.252.17.1/30
    decode_addr: str

    @property
    def prefill_ip(self) -> str:
        return self.prefill_addr.split("/")[0]

    @property
    def decode_ip(self) -> str:
        return self.decode_addr.split("/")[0]

    @property
    def work_dir(self) -> Path:
        """The endpoints' result files (fetch and bulk .npz): one scratch directory per lab, named by its tag."""
        return Path(tempfile.gettempdir()) / f"kvds-net-{self.tag}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@contextmanager
def scratch(lab: Lab) -> Iterator[Path]:
    """lab.work_dir, created for the run and removed after it, however it ends."""
    lab.work_dir.mkdir(mode=0o700, exist_ok=True)
    try:
        yield lab.work_dir
    finally:
        shutil.rmtree(lab.work_dir, ignore_errors=True)


def names(tag: str | None = None) -> Lab:
    """A fresh set of names (nothing is created): 4 hex digits keep the interface names under IFNAMSIZ."""
    tag = tag or secrets.token_hex(2)
    n = int(tag, 16) % 250 + 1
    return Lab(tag, f"kvds-net-{tag}-p", f"kvds-net-{tag}-d", f"kvp{tag}", f"kvd{tag}",
               f"10.252.{n}.1/30", f"10.252.{n}.2/30")


def build(lab: Lab, cfg: NetSetup, plan: list[HtbPlan], filters: Sequence[DscpFilter] = ()) -> None:
    """Create the namespaces, the veth pair, the bottleneck and the return path's delay (journaled, in that order)."""
    from harness.knobs import create_netns
    from harness.knobs.netns import create_veth_between

    create_netns(lab.prefill_ns)
    create_netns(lab.decode_ns)
    create_veth_between(lab.prefill_ns, lab.prefill_if, lab.prefill_addr, lab.decode_ns, lab.decode_if,
                        lab.decode_addr)
    shape(lab, cfg, plan, filters)
    if cfg.rtt_ms:
        from harness.knobs.qdisc import install_netem

        install_netem(lab.decode_ns, lab.decode_if, cfg.rtt_ms)


def leaf_of(cfg: NetSetup) -> Any:
    """The bottleneck classes' queue (harness.knobs.qdisc.Leaf), None for the kernel's default pfifo."""
    from harness.knobs.qdisc import Leaf

    if cfg.loss_pct:
        return Leaf("netem", cfg.loss_pct)
    return Leaf(cfg.leaf) if cfg.leaf != "pfifo" else None


def shape(lab: Lab, cfg: NetSetup, plan: list[HtbPlan], filters: Sequence[DscpFilter] = ()) -> None:
    shape_link(lab.prefill_ns, lab.prefill_if, cfg, plan, filters)


def shape_link(ns: str, ifname: str, cfg: NetSetup, plan: list[HtbPlan], filters: Sequence[DscpFilter] = ()) -> None:
    """The bottleneck on ns/ifname's egress: this lab's prefill side, or a two-host bench's sender
    (net_priority/link_agent.py)."""
    from harness.knobs import qdisc as q

    leaf = leaf_of(cfg)
    if cfg.qdisc == "htb":
        q.install_htb(ns, ifname, cfg.rate_mbit,
                      [q.HtbClass(p.minor, p.rate_mbit, p.ceil_mbit, p.prio) for p in plan], BASE_MINOR, leaf,
                      [(f.dscp, f.minor) for f in filters])
    else:
        burst = max(64 * 1024, int(cfg.rate_mbit * 1e6 / 8 / 250))  # 4 ms of the rate, at least 64 KiB (GSO skbs)
        q.install_tbf(ns, ifname, cfg.rate_mbit, burst, TBF_LATENCY_MS, leaf)


def stats(lab: Lab) -> dict[str, Any]:
    from harness.knobs.qdisc import qdisc_stats

    return qdisc_stats(lab.prefill_ns, lab.prefill_if)
