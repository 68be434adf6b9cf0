"""The declarative mapping from intent class to kernel mechanism.

Mappings are data (`harness/mappings/*.toml`), never code forks: a track asks `mapping.for_class(cls)` which
mechanisms to apply and `mapping.capabilities()` which kernel capabilities they need. A field left out of a
class means "this mechanism is not used for that class" (the kernel's default applies).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.intent import IntentClass
from harness.ioprio import IoPrio, parse_ioprio

MAPPINGS_DIR = Path(__file__).with_name("mappings")
DEFAULT_MAPPING = "intent"

MADVISE_ADVICE = {
    "MADV_NORMAL": 0, "MADV_RANDOM": 1, "MADV_SEQUENTIAL": 2, "MADV_WILLNEED": 3, "MADV_DONTNEED": 4,
    "MADV_FREE": 8, "MADV_COLD": 20, "MADV_PAGEOUT": 21, "MADV_POPULATE_READ": 22, "MADV_POPULATE_WRITE": 23,
}
DAMOS_ACTIONS = ("willneed", "cold", "pageout", "hugepage", "nohugepage", "lru_prio", "lru_deprio", "stat")
MEMCG_PLACEMENTS = ("protect", "squeeze")
"""protect: the class's pages are charged to a cgroup that is never squeezed; squeeze: to the limited one."""
ZSWAP_POLICIES = ("disable", "allow")
MM_INTENT_FLAGS = {"LATENCY_CRITICAL": 0x01, "RECLAIMABLE": 0x02, "PREFETCHABLE": 0x04, "RECOMPUTE_OK": 0x08,
                   "BACKGROUND": 0x10}
"""The mm_intent series' flags (include/uapi/linux/mm_intent.h, MM_INTENT_* without the prefix): a class with
`mm_intent` has its blocks registered in /sys/kernel/debug/mm_intent with these flags."""
MM_INTENT_PRIORITY_MAX = 255
SPILL_PACING = ("none", "slack", "deadline")  # slack: v1 pacer; deadline: spill scheduler v2 (io_priority)
NET_PRIORITY_MAX = 6   # socket priority bands an unprivileged SO_PRIORITY may set (0-6); the delivery track's HTB
DSCP_MAX = 63          # the six DSCP bits of the TOS byte (IP_TOS = dscp << 2)
TCP_CONGESTION = {
    "reno": None, "cubic": "TCP_CONG_CUBIC", "bbr": "TCP_CONG_BBR", "bic": "TCP_CONG_BIC", "cdg": "TCP_CONG_CDG",
    "dctcp": "TCP_CONG_DCTCP", "highspeed": "TCP_CONG_HSTCP", "htcp": "TCP_CONG_HTCP", "hybla": "TCP_CONG_HYBLA",
    "illinois": "TCP_CONG_ILLINOIS", "lp": "TCP_CONG_LP", "nv": "TCP_CONG_NV", "scalable": "TCP_CONG_SCALABLE",
    "vegas": "TCP_CONG_VEGAS", "veno": "TCP_CONG_VENO", "westwood": "TCP_CONG_WESTWOOD", "yeah": "TCP_CONG_YEAH",
}
"""The congestion controls Linux ships (net/ipv4/tcp_<name>.c) and the config option building each (reno is
always built in). A mapping's `congestion` names one of these or one this host registered (a BPF struct_ops one);
`kvds doctor` reports `net.cc.<name>` for every one of them."""
TCP_AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
CONGESTION_NAME = re.compile(r"[a-z0-9_]{1,15}")  # TCP_CA_NAME_MAX is 16 with the NUL


def registered_congestion() -> list[str]:
    """The congestion controls registered in the running kernel (empty when /proc does not say)."""
    try:
        return TCP_AVAILABLE_CC.read_text().split()
    except OSError:
        return []


@dataclass(frozen=True)
class ClassMapping:
    """Mechanisms for one intent class. None / empty means: leave the kernel's default."""

    madvise: tuple[str, ...] = ()
    damos_action: str | None = None
    memcg: str | None = None
    zswap: str | None = None
    read_ioprio: IoPrio | None = None
    write_ioprio: IoPrio | None = None
    uring_ioprio: IoPrio | None = None
    write_throttle_mbps: float | None = None
    spill_pacing: str | None = None
    wbt_lat_usec: int | None = None  # writeback throttling target of the spill's device (its queue/wbt_lat_usec)
    mm_intent: tuple[str, ...] = ()
    mm_intent_priority: int | None = None
    net_priority: int | None = None  # delivery track: SO_PRIORITY band 0-6 -> the lab's HTB class 1:(10 + band)
    dscp: int | None = None          # IP_TOS = dscp << 2: a mark only
    pacing_mbps: float | None = None  # SO_MAX_PACING_RATE: TCP internal pacing
    congestion: str | None = None    # TCP_CONGESTION

    @property
    def mm_intent_flags(self) -> int | None:
        """The register line's flags field, or None when the class is not registered."""
        if not self.mm_intent:
            return None
        flags = 0
        for name in self.mm_intent:
            flags |= MM_INTENT_FLAGS[name]
        return flags

    def capabilities(self) -> list[str]:
        """Capability names (as `kvds doctor` reports them) this class's mechanisms need."""
        caps: list[str] = [f"madvise.{a}" for a in self.madvise]
        if self.damos_action:
            caps.append("damon.vaddr")
        if self.memcg:
            caps.append("memcg")
        if self.zswap:
            caps.append("zswap")
        for prio in (self.read_ioprio, self.write_ioprio):
            if prio is not None:
                caps.append("ioprio.rt" if prio.klass == 1 else "ioprio")
        if self.uring_ioprio is not None:
            caps.append("io_uring")
        if self.write_throttle_mbps is not None:
            caps.append("blkio.throttle")
        if self.mm_intent:
            caps.append("mm_intent")
        if self.net_priority is not None:
            caps.append("net.qdisc.htb")
        if self.dscp is not None:
            caps.append("net.netns")  # only a mark: what it needs is the lab itself
        if self.pacing_mbps is not None:
            caps.append("net.pacing")
        if self.congestion is not None:
            caps.append(f"net.cc.{self.congestion}")
        return caps

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or v == ():
                continue
            out[f.name] = str(v) if isinstance(v, IoPrio) else (list(v) if isinstance(v, tuple) else v)
        return out


@dataclass(frozen=True)
class Mapping:
    name: str
    description: str
    classes: dict[IntentClass, ClassMapping] = field(default_factory=dict)
    source: str = ""

    def for_class(self, cls: IntentClass) -> ClassMapping:
        return self.classes.get(cls, ClassMapping())

    def capabilities(self) -> dict[str, list[IntentClass]]:
        """Each needed capability and the classes that need it."""
        out: dict[str, list[IntentClass]] = {}
        for cls in IntentClass:
            for cap in dict.fromkeys(self.for_class(cls).capabilities()):
                out.setdefault(cap, []).append(cls)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "classes": {c.value: self.for_class(c).as_dict() for c in IntentClass},
            "capabilities": {k: [c.value for c in v] for k, v in self.capabilities().items()},
        }


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise UserError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _parse_class(raw: Any, where: str) -> ClassMapping:
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a table")
    known = {f.name for f in fields(ClassMapping)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise UserError(f"{where}: unknown mechanism {unknown[0]!r} (known: {', '.join(sorted(known))})")
    kw: dict[str, Any] = {}
    if "madvise" in raw:
        adv = raw["madvise"]
        if not isinstance(adv, list) or not all(isinstance(a, str) for a in adv):
            raise UserError(f"{where}.madvise must be a list of advice names")
        for a in adv:
            if a not in MADVISE_ADVICE:
                raise UserError(f"{where}.madvise: unknown advice {a!r}")
        kw["madvise"] = tuple(adv)
    if "damos_action" in raw:
        kw["damos_action"] = _choice(raw["damos_action"], DAMOS_ACTIONS, f"{where}.damos_action")
    if "memcg" in raw:
        kw["memcg"] = _choice(raw["memcg"], MEMCG_PLACEMENTS, f"{where}.memcg")
    if "zswap" in raw:
        kw["zswap"] = _choice(raw["zswap"], ZSWAP_POLICIES, f"{where}.zswap")
    if "spill_pacing" in raw:
        kw["spill_pacing"] = _choice(raw["spill_pacing"], SPILL_PACING, f"{where}.spill_pacing")
    for key in ("read_ioprio", "write_ioprio", "uring_ioprio"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise UserError(f"{where}.{key} must be a string like 'rt/0'")
            try:
                kw[key] = parse_ioprio(raw[key])
            except UserError as exc:
                raise UserError(f"{where}.{key}: {exc}") from None
    if "write_throttle_mbps" in raw:
        v = raw["write_throttle_mbps"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise UserError(f"{where}.write_throttle_mbps must be a positive number")
        kw["write_throttle_mbps"] = float(v)
    if "wbt_lat_usec" in raw:
        v = raw["wbt_lat_usec"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UserError(f"{where}.wbt_lat_usec must be an integer >= 0 (0 turns writeback throttling off)")
        kw["wbt_lat_usec"] = v
    if "mm_intent" in raw:
        flags = raw["mm_intent"]
        if not isinstance(flags, list) or not flags or not all(isinstance(f, str) for f in flags):
            raise UserError(f"{where}.mm_intent must be a non-empty list of flag names like \"LATENCY_CRITICAL\"")
        for f in flags:
            if f not in MM_INTENT_FLAGS:
                raise UserError(f"{where}.mm_intent: unknown flag {f!r} (known: {', '.join(MM_INTENT_FLAGS)})")
        if len(set(flags)) != len(flags):
            raise UserError(f"{where}.mm_intent names a flag twice")
        kw["mm_intent"] = tuple(flags)
    if "mm_intent_priority" in raw:
        v = raw["mm_intent_priority"]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MM_INTENT_PRIORITY_MAX:
            raise UserError(f"{where}.mm_intent_priority must be an integer 0-{MM_INTENT_PRIORITY_MAX}, not {v!r}")
        if "mm_intent" not in raw:
            raise UserError(f"{where}.mm_intent_priority needs mm_intent (the flags the range is registered with)")
        kw["mm_intent_priority"] = v
    _parse_net(raw, where, kw)
    return ClassMapping(**kw)


def _parse_net(raw: dict[str, Any], where: str, kw: dict[str, Any]) -> None:
    """The delivery track's per-class socket options (net_priority)."""
    for key, top, what in (("net_priority", NET_PRIORITY_MAX, "a Linux socket priority band"),
                           ("dscp", DSCP_MAX, "a DSCP code point")):
        if key in raw:
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= top:
                raise UserError(f"{where}.{key} must be an integer 0-{top} ({what}), not {v!r}")
            kw[key] = v
    if "pacing_mbps" in raw:
        v = raw["pacing_mbps"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise UserError(f"{where}.pacing_mbps must be a positive number (Mbit/s), not {v!r}")
        kw["pacing_mbps"] = float(v)
    if "congestion" in raw:
        v = raw["congestion"]
        if not isinstance(v, str) or not CONGESTION_NAME.fullmatch(v):
            raise UserError(f"{where}.congestion must be a TCP congestion control name ([a-z0-9_], at most 15), "
                            f"not {v!r}")
        if v not in TCP_CONGESTION and v not in registered_congestion():
            raise UserError(f"{where}.congestion: unknown TCP congestion control {v!r} (Linux's: "
                            f"{', '.join(sorted(TCP_CONGESTION))}; or one {TCP_AVAILABLE_CC} lists)")
        kw["congestion"] = v


def parse_mapping(doc: dict[str, Any], source: str) -> Mapping:
    unknown = sorted(set(doc) - {"name", "description", "classes"})
    if unknown:
        raise UserError(f"{source}: unknown key {unknown[0]!r}")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(f"{source}: 'name' is missing")
    classes_raw = doc.get("classes", {})
    if not isinstance(classes_raw, dict):
        raise UserError(f"{source}: 'classes' must be a table")
    classes: dict[IntentClass, ClassMapping] = {}
    for key, raw in classes_raw.items():
        try:
            cls = IntentClass.parse(key)
        except UserError as exc:
            raise UserError(f"{source}: {exc}") from None
        classes[cls] = _parse_class(raw, f"{source}: classes.{key}")
    return Mapping(name, str(doc.get("description", "")), classes, source)


def available_mappings() -> list[str]:
    return sorted(p.stem for p in MAPPINGS_DIR.glob("*.toml"))


def load_mapping(name_or_path: str = DEFAULT_MAPPING) -> Mapping:
    """Load a named mapping shipped with kvds, or a TOML file given by path."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" and path.exists()):
        path = MAPPINGS_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise UserError(f"unknown mapping {name_or_path!r} (available: {', '.join(available_mappings())})")
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"mapping {str(path)!r} is not valid TOML: {exc}") from None
    return parse_mapping(doc, str(path))
