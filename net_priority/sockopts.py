"""Per-socket options of one traffic class (the delivery track's mechanisms), set and then read back.

A `SocketClass` names up to four options; `None` leaves the kernel's default. `apply(sock)` sets each given
option and reads it back with getsockopt: an option the kernel did not take as asked raises `SockoptError`
(one line naming the option, what was asked and what the kernel holds), so a run never reports a mechanism
that was not in effect.

- `priority` -> `SO_PRIORITY` (u32): on an HTB root a class id, (major << 16) + minor (tc's `1:a` = 65546),
  classifies directly; a value above 6 needs CAP_NET_ADMIN.
- `tos` -> `IP_TOS`: the TOS byte (dscp << 2). TCP keeps its own ECN bits, so its two low bits must be 0
  (`parse` refuses others; a SocketClass built with them fails its read-back on a TCP socket).
- `pacing_bytes_s` -> `SO_MAX_PACING_RATE`: bytes per second (u64, 1 .. 2**64-2; ~0 is "unlimited", the
  default, read back as None). TCP paces internally; no fq qdisc is needed.
- `congestion` -> `TCP_CONGESTION`: a registered congestion control (`net.ipv4.tcp_available_congestion_control`
  lists those an unprivileged socket may pick; root may pick any registered one).

Order matters: setting IP_TOS rewrites the socket priority (`__ip_sock_set_tos`: sk_priority =
rt_tos2priority(tos)), so `apply` sets the TOS first and the priority after it, and reads everything back at
the end.

Text form (the endpoints' `--sockopt`): comma-separated `key=value` with keys `prio`, `tos`, `pace`, `cc`, e.g.
`prio=65546,tos=184,pace=87500000,cc=bbr`; integers in decimal or 0x-hex (`prio=0x1000a`); the empty text or
`none` is the class with no option. `str(cls)` gives that text back (`parse(str(c)) == c`).
"""

from __future__ import annotations

import dataclasses
import re
import socket
import struct
from dataclasses import dataclass
from typing import Any

from harness.errors import UserError

SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # asm-generic/socket.h; Python does not export it
TCP_CA_NAME_MAX = 16  # include/net/tcp.h, with the NUL
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
_CC_NAME = re.compile(r"^[A-Za-z0-9_]{1,15}$")

# text key -> dataclass field
TEXT_KEYS = {"prio": "priority", "tos": "tos", "pace": "pacing_bytes_s", "cc": "congestion"}
FIELD_KEYS = {v: k for k, v in TEXT_KEYS.items()}


class SockoptError(OSError):
    """The kernel refused an option, or holds another value than the one set (read back after setting)."""


@dataclass(frozen=True)
class SocketClass:
    priority: int | None = None  # SO_PRIORITY (u32)
    tos: int | None = None  # IP_TOS byte (dscp << 2)
    pacing_bytes_s: int | None = None  # SO_MAX_PACING_RATE, bytes/s
    congestion: str | None = None  # TCP_CONGESTION name

    def __post_init__(self) -> None:
        _check_int("priority", self.priority, 0, U32_MAX)
        _check_int("tos", self.tos, 0, 255)
        _check_int("pacing_bytes_s", self.pacing_bytes_s, 1, U64_MAX - 1)  # ~0 is "unlimited"
        if self.congestion is not None and (not isinstance(self.congestion, str)
                                            or not _CC_NAME.match(self.congestion)):
            raise ValueError(f"congestion {self.congestion!r} is not a congestion control name")

    # --- the kernel --------------------------------------------------------------------------------------
    def apply(self, sock: socket.socket) -> "SocketClass":
        """Set every given option on sock (TOS before priority), read all of them back, raise SockoptError if the
        kernel refused one or holds another value. Returns what the kernel holds for the given fields."""
        if self.tos is not None:
            _set(sock, "IP_TOS", socket.IPPROTO_IP, socket.IP_TOS, struct.pack("=i", self.tos), self.tos)
        if self.priority is not None:
            _set(sock, "SO_PRIORITY", socket.SOL_SOCKET, socket.SO_PRIORITY, struct.pack("=I", self.priority),
                 self.priority)
        if self.pacing_bytes_s is not None:
            _set(sock, "SO_MAX_PACING_RATE", socket.SOL_SOCKET, SO_MAX_PACING_RATE,
                 struct.pack("=Q", self.pacing_bytes_s), self.pacing_bytes_s)
        if self.congestion is not None:
            _set(sock, "TCP_CONGESTION", socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.congestion.encode(),
                 self.congestion)
        return self.check(sock)

    def check(self, sock: socket.socket) -> "SocketClass":
        """Read the options back (no setting): SockoptError unless the kernel holds every given field's value.
        Returns what the kernel holds for the given fields (the others None)."""
        held = read(sock)
        for f in dataclasses.fields(self):
            want, got = getattr(self, f.name), getattr(held, f.name)
            if want is not None and want != got:
                raise SockoptError(f"{_OPTION[f.name]}: set {want!r}, but the kernel holds {got!r}")
        return SocketClass(**{f.name: getattr(held, f.name) if getattr(self, f.name) is not None else None
                              for f in dataclasses.fields(self)})

    # --- conversions -------------------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        """Every field (None for an option left at the kernel's default)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SocketClass":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown socket class field(s): {', '.join(sorted(unknown))}")
        return cls(**d)

    def __str__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                parts.append(f"{FIELD_KEYS[f.name]}={v}")
        return ",".join(parts) or "none"

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in dataclasses.fields(self))


_OPTION = {"priority": "SO_PRIORITY", "tos": "IP_TOS", "pacing_bytes_s": "SO_MAX_PACING_RATE",
           "congestion": "TCP_CONGESTION"}


def _check_int(name: str, v: Any, lo: int, hi: int) -> None:
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} {v!r} is not an integer in [{lo}, {hi}]")


def _set(sock: socket.socket, name: str, level: int, opt: int, raw: bytes, want: Any) -> None:
    try:
        sock.setsockopt(level, opt, raw)
    except OSError as e:
        raise SockoptError(e.errno, f"{name}={want!r}: the kernel refused it ({e.strerror})") from None


def read(sock: socket.socket) -> SocketClass:
    """What the kernel holds on sock for all four options (pacing: None when unlimited, ~0)."""
    tos = struct.unpack("=i", sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS, 4))[0]
    prio = struct.unpack("=I", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 4))[0]
    pace = struct.unpack("=Q", sock.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, 8))[0]
    cc = None
    if sock.type == socket.SOCK_STREAM:
        cc = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, TCP_CA_NAME_MAX).split(b"\0", 1)[0].decode()
    return SocketClass(priority=prio, tos=tos, pacing_bytes_s=None if pace in (U64_MAX, U32_MAX) else pace,
                       congestion=cc or None)


def _int(key: str, text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise UserError(f"--sockopt {key}={text}: not an integer") from None


def parse(text: str) -> SocketClass:
    """The compact text form ("prio=65546,tos=184,pace=87500000,cc=bbr"; "" or "none": no option) -> SocketClass.
    Bad input raises a one-line UserError."""
    text = text.strip()
    if text in ("", "none"):
        return SocketClass()
    kw: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise UserError(f"--sockopt {item.strip()!r}: expected key=value with key one of {', '.join(TEXT_KEYS)}")
        if key not in TEXT_KEYS:
            raise UserError(f"--sockopt: unknown key {key!r} (known: {', '.join(TEXT_KEYS)})")
        field = TEXT_KEYS[key]
        if field in kw:
            raise UserError(f"--sockopt: {key} given twice")
        if field == "congestion":
            if not _CC_NAME.match(value):
                raise UserError(f"--sockopt cc={value}: not a congestion control name")
            kw[field] = value
            continue
        n = _int(key, value)
        if field == "priority" and not 0 <= n <= U32_MAX:
            raise UserError(f"--sockopt prio={value}: SO_PRIORITY takes 0..{U32_MAX}")
        if field == "tos":
            if not 0 <= n <= 255:
                raise UserError(f"--sockopt tos={value}: IP_TOS takes a byte, 0..255 (dscp << 2)")
            if n & 3:
                raise UserError(f"--sockopt tos={value}: the two low (ECN) bits must be 0; TCP keeps its own "
                                f"(dscp {n >> 2} is tos={n & ~3})")
        if field == "pacing_bytes_s" and not 1 <= n < U64_MAX:
            raise UserError(f"--sockopt pace={value}: SO_MAX_PACING_RATE takes 1..{U64_MAX - 1} bytes/s "
                            "(leave it out for unlimited)")
        kw[field] = n
    return SocketClass(**kw)
