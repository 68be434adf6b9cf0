"""From a mapping's network fields to what the lab sets: one SocketClass per traffic role and the HTB classes the
prefill side's root needs. Roles: the fetcher's KV is decode-critical, the bulk mover's is cold-spillable
(a whole prompt's cache migrating, cold blocks moving to a remote tier)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import ClassMapping, Mapping, load_mapping
from net_priority.config import BASELINE, UNLOADED, NetSetup, path_qdiscs

ROLES = {"fetch": IntentClass.DECODE_CRITICAL, "bulk": IntentClass.COLD_SPILLABLE}
BASE_MINOR = 10          # class 1:(10 + net_priority); 1:10 is the default class (socket priority 0)
HIGH_SHARE = 0.9         # guaranteed rate of the classes above the default one, together (the rest: the default)


@dataclass(frozen=True)
class RoleClass:
    """What one role's sockets carry in one variant."""
    net_priority: int | None
    dscp: int | None
    pacing_mbps: float | None
    congestion: str | None

    def sockopt(self, qdisc: str, sockets: int = 1, classify: str = "priority") -> dict[str, object]:
        """The socket options (net_priority/sockopts.py SocketClass fields) of each of the role's `sockets` sockets.
        On an HTB root the socket priority is the class id 1:(10 + net_priority) (decimal minor; tc prints it in hex),
        which sch_htb classifies without a filter; with `classify` "dscp" the sockets carry only their DSCP mark and
        the root's u32 filters (`dscp_filters`) pick the class, as a router would. `pacing_mbps` is the class's rate:
        each socket is paced at its share (SO_MAX_PACING_RATE is per socket)."""
        from harness.knobs.qdisc import htb_priority

        out: dict[str, object] = {}
        if self.net_priority is not None:
            if qdisc != "htb":
                raise UserError(f"net_priority needs --qdisc htb (a {qdisc} root has one queue)")
            if classify == "dscp":
                if self.dscp is None and self.net_priority:
                    raise UserError(f"--classify dscp: a class with net_priority {self.net_priority} has no dscp "
                                    "mark to be classified by")
            else:
                out["priority"] = htb_priority(BASE_MINOR + self.net_priority)
        if self.dscp is not None:
            out["tos"] = self.dscp << 2
        if self.pacing_mbps is not None:
            out["pacing_bytes_s"] = int(self.pacing_mbps * 1e6 / 8 / max(1, sockets))
        if self.congestion is not None:
            out["congestion"] = self.congestion
        return out

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


NONE = RoleClass(None, None, None, None)


def role_class(cm: ClassMapping) -> RoleClass:
    return RoleClass(cm.net_priority, cm.dscp, cm.pacing_mbps, cm.congestion)


def roles_of(mapping: Mapping | None) -> dict[str, RoleClass]:
    """Per role, its socket class under `mapping` (None: the baseline, every socket in the default class)."""
    if mapping is None:
        return {r: NONE for r in ROLES}
    return {r: role_class(mapping.for_class(c)) for r, c in ROLES.items()}


def role_sockopt(cfg: NetSetup, role: str, rc: RoleClass) -> dict[str, object]:
    """One socket's options for `role` in a run of `cfg` (the bulk role's pacing is split over its streams)."""
    return rc.sockopt(cfg.qdisc, cfg.bulk_streams if role == "bulk" else 1, cfg.classify)


@dataclass(frozen=True)
class DscpFilter:
    """A u32 filter on the HTB root: packets whose DSCP is `dscp` go to class 1:<minor>."""
    dscp: int
    minor: int


def dscp_filters(mappings: Iterable[Mapping]) -> list[DscpFilter]:
    """For `--classify dscp`: one filter per DSCP mark the mappings' roles use, into the class their net_priority
    names (the default class without one). A mark two mappings send to different classes is refused."""
    seen: dict[int, int] = {}
    for m in mappings:
        for rc in roles_of(m).values():
            if rc.dscp is None:
                continue
            minor = BASE_MINOR + (rc.net_priority or 0)
            if seen.setdefault(rc.dscp, minor) != minor:
                raise UserError(f"--classify dscp: dscp {rc.dscp} goes to class 1:{seen[rc.dscp]:x} in one mapping "
                                f"and 1:{minor:x} in another: one filter cannot do both")
    return [DscpFilter(d, n) for d, n in sorted(seen.items())]


def bottleneck_plan(cfg: NetSetup, mappings: Iterable[Mapping]) -> tuple[list[HtbPlan], list[DscpFilter]]:
    """The HTB classes for every net_priority the mappings use (plus the default class) and, with `--classify dscp`,
    the filters into them: what a run installs and what `--dry-run` shows, from one function."""
    mappings = list(mappings)
    priorities = {rc.net_priority for m in mappings for rc in roles_of(m).values() if rc.net_priority is not None}
    return htb_plan(cfg.rate_mbit, priorities | {0}), dscp_filters(mappings) if cfg.classify == "dscp" else []


def has_net_fields(mapping: Mapping) -> bool:
    return any(rc != NONE for rc in roles_of(mapping).values())


@dataclass(frozen=True)
class HtbPlan:
    minor: int
    rate_mbit: float
    ceil_mbit: float
    prio: int


def htb_plan(rate_mbit: float, priorities: set[int]) -> list[HtbPlan]:
    """The leaf classes: the default 1:10 (priority 0) and one per other priority in use, a higher priority served
    first (HTB prio 6 - net_priority) with a share of the rate guaranteed; every class may borrow up to the link."""
    high = sorted(p for p in priorities if p > 0)
    share = HIGH_SHARE * rate_mbit / len(high) if high else 0.0
    out = [HtbPlan(BASE_MINOR, rate_mbit - share * len(high), rate_mbit, 6)]
    out += [HtbPlan(BASE_MINOR + p, share, rate_mbit, 6 - p) for p in high]
    return out


def mappings_of(cfg: NetSetup) -> dict[str, Mapping]:
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


def needed_capabilities(cfg: NetSetup, mappings: dict[str, Mapping]) -> list[str]:
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
