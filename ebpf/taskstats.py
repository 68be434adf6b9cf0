"""Per-task delay accounting through the taskstats generic-netlink family (pyroute2 for the socket).

Delays are cumulative since a task started and summed over a thread group (TASKSTATS_CMD_ATTR_TGID); kvds
reports the change between the start and the end of a recording. A child that has exited but is not reaped
yet (waitid WNOWAIT) still answers: a multi-threaded group through the kernel's per-group exit record, a
single-threaded one through its own task record; a process reaped by someone else before the end is lost. The
kernel only accounts while `kernel.task_delayacct` is 1; kvds sets it through the knob journal.

The struct is decoded here from the uapi layout (append-only across versions; verified against
include/uapi/linux/taskstats.h of 6.12, version 14): pyroute2 0.9 decodes version 16 with its pre-v8 layout
and lacks the freepages/thrashing fields.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

from harness.errors import Unavailable

# Byte offsets of the fields kvds reads in struct taskstats (uapi, aligned(8) members accounted for).
FIELDS = {
    "version": (0, "H"),
    "cpu_count": (16, "Q"), "cpu_delay_total": (24, "Q"),
    "blkio_count": (32, "Q"), "blkio_delay_total": (40, "Q"),
    "swapin_count": (48, "Q"), "swapin_delay_total": (56, "Q"),
    "ac_comm": (80, "32s"),
    "ac_pid": (128, "I"),
    "freepages_count": (312, "Q"), "freepages_delay_total": (320, "Q"),
    "thrashing_count": (328, "Q"), "thrashing_delay_total": (336, "Q"),
}
MIN_VERSION = 9  # thrashing fields appeared in version 9 (Linux 5.0)
# kvds name -> taskstats prefix: swap-in, block I/O, direct/memcg reclaim ("freepages"), thrashing, run queue.
DELAYS = {"swapin": "swapin", "blkio": "blkio", "reclaim": "freepages", "thrashing": "thrashing", "cpu": "cpu"}

TASKSTATS_CMD_GET = 1
FAMILY = "TASKSTATS"
REFUSED = (errno.EPERM, errno.EACCES)  # TASKSTATS_CMD_GET is GENL_ADMIN_PERM: it needs CAP_NET_ADMIN


@dataclass(frozen=True)
class Delays:
    pid: int
    comm: str
    counts: dict[str, int]
    delay_ns: dict[str, int]

    def minus(self, before: "Delays | None") -> "Delays":
        if before is None:
            return self
        return Delays(self.pid, self.comm, {k: v - before.counts.get(k, 0) for k, v in self.counts.items()},
                      {k: v - before.delay_ns.get(k, 0) for k, v in self.delay_ns.items()})

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "comm": self.comm,
                **{k: {"count": self.counts[k], "delay_ns": self.delay_ns[k]} for k in DELAYS}}


def decode(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (off, fmt) in FIELDS.items():
        (v,) = struct.unpack_from("=" + fmt, raw, off)
        out[name] = v
    out["ac_comm"] = out["ac_comm"].split(b"\0", 1)[0].decode(errors="replace")
    return out


class TaskstatsClient:
    """One genetlink socket to the TASKSTATS family; query(pid) returns Delays or None (gone).

    Only a real absence raises Unavailable: the kernel has no such family (CONFIG_TASKSTATS off), or it refuses
    this process (no CAP_NET_ADMIN). Any other failure is kvds's and propagates as itself. `family` is the
    genetlink family's name (tests name one the kernel lacks, or one that does not speak taskstats)."""

    def __init__(self, family: str = FAMILY) -> None:
        from pyroute2.netlink.exceptions import NetlinkError
        from pyroute2.netlink.generic import GenericNetlinkSocket
        from pyroute2.netlink.taskstats import taskstatsmsg

        self.family = family
        try:
            self._sock = GenericNetlinkSocket()
        except OSError as exc:  # a sandbox (seccomp, no netlink) or a kernel without generic netlink
            if exc.errno in (*REFUSED, errno.EPROTONOSUPPORT, errno.EAFNOSUPPORT):
                raise Unavailable(f"no generic-netlink socket for this process: {exc}") from None
            raise
        try:
            self._sock.bind(family, taskstatsmsg)
        except NetlinkError as exc:
            self._sock.close()
            if exc.code == errno.ENOENT:
                why = " (CONFIG_TASKSTATS off)" if family == FAMILY else ""
                raise Unavailable(f"the kernel has no {family} generic-netlink family{why}") from None
            if exc.code in REFUSED:
                raise Unavailable(_refused(family, exc.code)) from None
            raise
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "TaskstatsClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, tgid: int) -> Delays | None:
        """A thread group's delays; for an unreaped single-threaded zombie, its own (the kernel keeps no group
        record for single-threaded processes and skips exited threads when summing a group)."""
        group = self._request("TASKSTATS_CMD_ATTR_TGID", tgid)
        if group is not None and any(group.counts.values()):
            return group
        own = self._request("TASKSTATS_CMD_ATTR_PID", tgid)
        return own if own is not None else group

    def _request(self, attr: str, ident: int) -> Delays | None:
        from pyroute2.netlink import NLM_F_REQUEST
        from pyroute2.netlink.exceptions import NetlinkError
        from pyroute2.netlink.taskstats import tcmd

        msg = tcmd()
        msg["cmd"] = TASKSTATS_CMD_GET
        msg["version"] = 1
        msg["attrs"].append([attr, ident])
        try:
            replies = self._sock.nlm_request(msg, self._sock.prid, msg_flags=NLM_F_REQUEST)
        except NetlinkError as exc:
            if exc.code == errno.ESRCH:  # the process is gone (reaped)
                return None
            if exc.code in REFUSED:
                raise Unavailable(_refused(self.family, exc.code)) from None
            raise
        for reply in replies:
            aggr = reply.get_attr("TASKSTATS_TYPE_AGGR_TGID") or reply.get_attr("TASKSTATS_TYPE_AGGR_PID")
            if aggr is None:
                continue
            stats = aggr.get_attr("TASKSTATS_TYPE_STATS")
            raw = bytes(stats.data[stats.offset + 4: stats.offset + stats.length])
            f = decode(raw)
            if f["version"] < MIN_VERSION:
                raise Unavailable(f"taskstats version {f['version']} lacks thrashing/reclaim delays")
            return Delays(ident, f["ac_comm"] or _comm(ident), {k: f[f"{p}_count"] for k, p in DELAYS.items()},
                          {k: f[f"{p}_delay_total"] for k, p in DELAYS.items()})
        return None



NETLINK_GENERIC = 16
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
ATTR_PID, ATTR_TGID = 1, 2     # TASKSTATS_CMD_ATTR_PID (one task: a thread), _TGID (its whole thread group)
TYPE_STATS = 3                 # TASKSTATS_TYPE_STATS, nested in
TYPE_AGGR = (4, 5)             # TASKSTATS_TYPE_AGGR_PID / _AGGR_TGID


class DelayQuery:
    """A task's or a thread group's cumulative delays (ns per DELAYS name) in one raw genetlink round trip, for a
    caller that asks every few milliseconds (e2e reads its replay thread's delays around every decode step):
    pyroute2's request costs about 230 us on this host, this one about 7-11 us. The family's id comes from a TaskstatsClient (which also says
    why a host cannot answer); the reply lands in a buffer allocated once, so a query allocates next to nothing
    (it runs inside a squeezed memory group)."""

    def __init__(self, client: TaskstatsClient) -> None:
        self._family = int(client._sock.prid)
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self._sock.bind((0, 0))
        self._buf = bytearray(4096)
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def task(self, tid: int) -> dict[str, int] | None:
        """One task's (thread's) delay totals (ns), None when it is gone."""
        return self._ask(ATTR_PID, tid)

    def group(self, tgid: int) -> dict[str, int] | None:
        """A thread group's: its live threads' totals (and, with a listener, its exited ones')."""
        return self._ask(ATTR_TGID, tgid)

    def _ask(self, attr: int, ident: int) -> dict[str, int] | None:
        self._seq += 1
        body = struct.pack("=BBHHHI", TASKSTATS_CMD_GET, 1, 0, 8, attr, ident)
        self._sock.send(struct.pack("=IHHII", 16 + len(body), self._family, NLM_F_REQUEST, self._seq, 0) + body)
        n = self._sock.recv_into(self._buf)
        data = memoryview(self._buf)[:n]
        length, kind = struct.unpack_from("=IH", data, 0)
        if kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", data, 16)
            if -err == errno.ESRCH:
                return None
            raise OSError(-err, f"taskstats query: {os.strerror(-err)}")
        off = 20                      # nlmsghdr + genlmsghdr
        while off + 4 <= min(length, n):
            alen, atype = struct.unpack_from("=HH", data, off)
            if atype in TYPE_AGGR:
                inner = off + 4
                while inner + 4 <= off + alen:
                    blen, btype = struct.unpack_from("=HH", data, inner)
                    if btype == TYPE_STATS:
                        f = decode(bytes(data[inner + 4:inner + blen]))
                        return {k: f[f"{p}_delay_total"] for k, p in DELAYS.items()}
                    inner += (blen + 3) & ~3
            off += (alen + 3) & ~3
        raise OSError(errno.EPROTO, "taskstats reply without a stats record")


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _refused(family: str, code: int) -> str:
    return f"the kernel refuses {family} queries from this process ({os.strerror(code)}): they need CAP_NET_ADMIN"


def family_status(family: str = FAMILY) -> tuple[bool, str]:
    """Whether the TASKSTATS genetlink family answers for this process (doctor probe).

    (False, reason) only for a real absence (no family, no permission, a version without the delays kvds
    reads, no record for this process); an exception inside kvds propagates: it is an error, not a skip."""
    try:
        with TaskstatsClient(family) as c:
            d = c.query(os.getpid())
    except Unavailable as exc:
        return False, str(exc)
    if d is None:
        return False, "taskstats returned no TGID record for this process"
    return True, "TASKSTATS genetlink family answers TGID queries"
