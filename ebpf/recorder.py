"""The recording session: compile and attach the chosen probe sets, fill their filters, snapshot the maps,
and hand back plain data (see ebpf/README.md for the shape) or write it into a results Run.

Kernel state it changes goes through the knob journal of the calling process: tracefs is mounted when it is
not, and `kernel.task_delayacct` is set to 1 for the delays probe; both come back when the caller's journal
restores (the kvds CLI does it on exit).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from harness.errors import Unavailable, UserError
from harness.knobs import ensure_tracefs, sysctl
from harness.knobs.cgroups import v2_root
from harness.knobs.mounts import TRACEFS

from ebpf import hist as H
from ebpf.attach import LOADER, load_program, missed_events, program_stats
from ebpf.programs import BLK_ACCT, BLK_KINDS, CLASSES, OPS, RECLAIM_KINDS, TRACEPOINTS, ProgramSpec
from ebpf.taskstats import Delays, TaskstatsClient

PROBES = ("blk", "reclaim", "faults", "delays")
FAULT_NOTE = ("exceptions:page_fault_user/page_fault_kernel fire on fault entry only (no exit tracepoint, no "
              "kprobes on this kernel): counts per pid and kind, no latency")
REFRESH_S = 0.25  # how often v1 cgroup members and reclaiming tasks' cgroups are re-read


def parse_probes(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [p.strip() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    bad = [p for p in items if p not in PROBES]
    if bad or not items:
        raise UserError(f"unknown probe {', '.join(bad) or '(none)'}; choose from {','.join(PROBES)}")
    return tuple(dict.fromkeys(items))


def kernel_dev(path: str) -> tuple[int, str]:
    """(dev_t as the block tracepoints encode it: major << 20 | minor, "major:minor") of a block device."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserError(f"device {path}: {exc.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise UserError(f"{path} is not a block device")
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    return (major << 20) | minor, f"{major}:{minor}"


def device_name(kdev: int) -> str:
    major, minor = kdev >> 20, kdev & ((1 << 20) - 1)
    link = Path(f"/sys/dev/block/{major}:{minor}")
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return f"{major}:{minor}"


def fault_kind(code: int) -> str:
    access = "exec" if code & 0x10 else "write" if code & 0x2 else "read"
    return f"{access}-{'protection' if code & 0x1 else 'not-present'}"


def memory_cgroup_of(pid: int) -> str | None:
    """The v1 memory cgroup path of a process, else its v2 path; None when it is gone."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in lines:
        hid, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            return path
        if hid == "0":
            v2 = path
    return v2


def _is_cgroup2(path: Path) -> bool:
    root = v2_root()
    return root is not None and path.resolve().is_relative_to(root)


class Recorder:
    """One recording. Use `session(...)` (a context manager) or start()/stop() explicitly.

    probes:   subset of PROBES. devices: block devices to keep (default all). pids: processes to follow (their
    children too, via sched_process_fork); pids=[] means "filter, processes added later with add_pid()".
    cgroups:  cgroup directories to follow (v2: by cgroup id in the kernel; v1: by their member pids, re-read
    every 0.25 s). delays: taskstats of the followed pids, or of every process when nothing is followed.
    """

    def __init__(self, probes: Sequence[str] = ("blk",), devices: Sequence[str] | None = None,
                 pids: Sequence[int] | None = None, cgroups: Sequence[str] | None = None,
                 follow_children: bool = True) -> None:
        self.probes = parse_probes(probes)
        self.kernel_probes = tuple(p for p in self.probes if p != "delays")
        self.devices = {kernel_dev(d)[0]: d for d in (devices or [])}
        self.pids: list[int] = list(pids or [])
        self.cgroups = [Path(c) for c in (cgroups or [])]
        for c in self.cgroups:
            if not (c / "cgroup.procs").exists():
                raise UserError(f"{c} is not a cgroup directory")
        self.filter_tasks = pids is not None or bool(self.cgroups)
        self.spec = ProgramSpec(self.kernel_probes, self.filter_tasks, bool(self.devices), follow_children,
                                tuple(self.devices))
        self.bpf: Any = None
        self.load_seconds: float | None = None
        self.backend: str | None = None  # the loader ("libbpf") once programs are loaded
        self.compile_seconds: float | None = None  # clang on first use (0.0 when the object was cached)
        self.backend_detail = ""  # "block_rq_insert/issue/complete via tp_btf" (or via tracepoint, and why)
        self.commands: dict | None = None  # the BPF object loaded and the commands that built it
        self.started_at: float | None = None
        self.duration_s: float | None = None
        self._ts: TaskstatsClient | None = None
        self._delay_before: dict[int, Delays | None] = {}
        self._delay_after: dict[int, Delays] = {}
        self._delays_all = False
        self._cg_of: dict[int, str] = {}
        self._comm_of: dict[int, str] = {}
        self._snap: dict[str, list[tuple[Any, Any]]] = {}
        self._missed: dict[str, int] = {}
        self.program_stats: dict[str, tuple[int, int]] = {}  # (runs, ns in program) at stop; needs bpf_stats
        self._stop_evt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._results: dict[str, Any] | None = None

    # ---- life cycle -------------------------------------------------------------------------------------
    def start(self) -> "Recorder":
        if os.geteuid() != 0:
            raise UserError("eBPF recording needs root (it loads BPF programs and mounts tracefs)")
        if self.kernel_probes:
            ensure_tracefs()
            missing = [tp for p in self.kernel_probes for tp in TRACEPOINTS[p]
                       if not (Path(TRACEFS) / "events" / tp).is_dir()]
            if missing:
                raise Unavailable(f"tracepoints missing on this kernel: {', '.join(missing)}")
            loaded = load_program(self.spec)
            self.backend = LOADER
            self.bpf, self.load_seconds, self.compile_seconds = loaded.bpf, loaded.load_seconds, loaded.compile_seconds
            self.backend_detail = loaded.detail
            self.commands = loaded.commands
            self._fill_filters()
        if "delays" in self.probes:
            sysctl("kernel.task_delayacct", 1)
            self._ts = TaskstatsClient()
            self._delays_all = not self.filter_tasks
            for pid in (self._all_pids() if self._delays_all else self.pids):
                self._delay_before[pid] = self._ts.query(pid)
        self.started_at = time.monotonic()
        if self.kernel_probes and (self.cgroups or "reclaim" in self.kernel_probes):
            self._thread = threading.Thread(target=self._housekeeping, name="kvds-ebpf", daemon=True)
            self._thread.start()
        return self

    def add_pid(self, pid: int) -> None:
        """Follow a process started after start() (its delays count from its birth)."""
        if not self.filter_tasks:
            raise UserError("add_pid needs a filtered recording: construct the Recorder with pids=[]")
        if pid not in self.pids:
            self.pids.append(pid)
        if self.bpf is not None:
            self._want(pid)
        if self._ts is not None and pid not in self._delay_before:
            self._delay_before[pid] = None

    def stop(self) -> None:
        """Snapshot the maps and taskstats, then detach. Call while exited children are still unreaped."""
        if self.started_at is None or self._results is not None:
            return
        self.duration_s = time.monotonic() - self.started_at
        self._stop_evt.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self.bpf is not None:
                self._resolve_cgroups()
                for name in ("blk_hist", "blk_acct", "blk_issued", "rc_hist", "rc_stats", "fault_counts", "comms"):
                    try:
                        table = self.bpf[name.encode()]
                    except KeyError:
                        continue
                    self._snap[name] = [(k, v) for k, v in table.items()]
                self._missed = missed_events(self.bpf)
                self.program_stats = program_stats(self.bpf)
            if self._ts is not None:
                pids = set(self._delay_before) | (set(self._all_pids()) if self._delays_all else set(self.pids))
                for pid in sorted(pids):
                    d = self._ts.query(pid)
                    if d is not None:
                        self._delay_after[pid] = d
        finally:
            if self.bpf is not None:
                self.bpf.cleanup()
                self.bpf = None
            if self._ts is not None:
                self._ts.close()
                self._ts = None
        self._results = self._build()

    # ---- filters and housekeeping ---------------------------------------------------------------------------
    def _want(self, pid: int) -> None:
        self.bpf[b"want_tgid"][self.bpf[b"want_tgid"].Key(pid)] = self.bpf[b"want_tgid"].Leaf(1)

    def _fill_filters(self) -> None:
        for kdev in self.devices:
            if "blk" in self.kernel_probes:
                self.bpf[b"blk_devs"][self.bpf[b"blk_devs"].Key(kdev)] = self.bpf[b"blk_devs"].Leaf(1)
        for pid in self.pids:
            self._want(pid)
        for cg in self.cgroups:
            if _is_cgroup2(cg):
                cgid = os.stat(cg).st_ino
                self.bpf[b"want_cgid"][self.bpf[b"want_cgid"].Key(cgid)] = self.bpf[b"want_cgid"].Leaf(1)
        self._refresh_v1_members()

    def _refresh_v1_members(self) -> None:
        for cg in self.cgroups:
            if _is_cgroup2(cg):
                continue
            try:
                members = [int(x) for x in (cg / "cgroup.procs").read_text().split()]
            except OSError:
                continue
            for pid in members:
                self._want(pid)

    def _resolve_cgroups(self) -> None:
        """Name the memory cgroup of every task seen reclaiming while it still lives."""
        try:
            stats = self.bpf[b"rc_stats"]
        except KeyError:
            return
        for k, _ in stats.items():
            if k.tgid not in self._cg_of:
                cg = memory_cgroup_of(k.tgid)
                if cg is not None:
                    self._cg_of[k.tgid] = cg
                    try:
                        self._comm_of[k.tgid] = Path(f"/proc/{k.tgid}/comm").read_text().strip()
                    except OSError:
                        pass

    def _housekeeping(self) -> None:
        while not self._stop_evt.wait(REFRESH_S):
            with self._lock:
                if self.bpf is None:
                    return
                self._refresh_v1_members()
                self._resolve_cgroups()

    @staticmethod
    def _all_pids() -> list[int]:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]

    # ---- results ----------------------------------------------------------------------------------------------
    def results(self) -> dict[str, Any]:
        """Plain data (dicts, lists, ints, strings): see ebpf/README.md. Valid after stop()."""
        if self._results is None:
            raise UserError("results() is available after the recording stopped (leave the session first)")
        return self._results

    def _build(self) -> dict[str, Any]:
        comms = {k.value: bytes(v.c).split(b"\0", 1)[0].decode(errors="replace")
                 for k, v in self._snap.get("comms", [])}
        comms.update(self._comm_of)
        out: dict[str, Any] = {
            "probes": list(self.probes), "duration_s": round(self.duration_s or 0.0, 3),
            "load_attach_s": None if self.load_seconds is None else round(self.load_seconds, 4),
            "filters": {"devices": list(self.devices.values()), "pids": list(self.pids),
                        "cgroups": [str(c) for c in self.cgroups]},
        }
        if self.kernel_probes:
            # Program runs the kernel skipped because another BPF program was running on that CPU (all devices
            # and tasks): the events a histogram cannot contain. See ebpf/README.md, "Precision and limits".
            out["missed_events"] = dict(self._missed)
        if "blk" in self.kernel_probes:
            blk: dict[str, Any] = {kind: {} for kind in BLK_KINDS}
            devs: dict[str, str] = {}
            for k, v in self._snap.get("blk_hist", []):
                name = device_name(k.dev)
                devs[name] = f"{k.dev >> 20}:{k.dev & 0xFFFFF}"
                cls = CLASSES[k.cls] if k.cls < len(CLASSES) else f"class{k.cls}"
                leaf = blk[BLK_KINDS[k.kind]].setdefault(name, {}).setdefault(cls, {}).setdefault(
                    OPS[k.op], H.new_hist("usecs"))
                H.add(leaf, k.slot, v.value)
            blk["accounting"] = self._build_accounting(blk["issue_to_complete"], devs)
            blk["devices"] = devs
            out["blk"] = blk
        if "reclaim" in self.kernel_probes:
            out["reclaim"] = self._build_reclaim(comms)
        if "faults" in self.kernel_probes:
            by_pid: dict[str, Any] = {}
            totals: dict[str, int] = {}
            for k, v in self._snap.get("fault_counts", []):
                rec = by_pid.setdefault(str(k.tgid), {"comm": comms.get(k.tgid, ""), "user": {}, "kernel": {},
                                                      "total": 0})
                kind = fault_kind(k.kind)
                side = rec["user" if k.user else "kernel"]
                side[kind] = side.get(kind, 0) + v.value
                rec["total"] += v.value
                totals[kind] = totals.get(kind, 0) + v.value
            out["faults"] = {"note": FAULT_NOTE, "by_pid": by_pid, "totals": totals}
        if "delays" in self.probes:
            by = {}
            for pid, after in self._delay_after.items():
                d = after.minus(self._delay_before.get(pid))
                if self._delays_all and not any(d.delay_ns.values()):
                    continue
                by[str(pid)] = d.as_dict()
            lost = sorted(set(self._delay_before) - set(self._delay_after)) if not self._delays_all else []
            out["delays"] = {"source": "taskstats TGID (kernel.task_delayacct=1)", "unit": "ns", "by_pid": by,
                             "exited_unreported": lost}
        return out

    def _build_accounting(self, timed: dict[str, Any], devs: dict[str, str]) -> dict[str, Any]:
        """Every request of a kept device, per class and op: issued = timed + unfinished + overwritten + lost, and
        completions seen = timed + untimed. unfinished: still in blk_issued at stop (in flight then, or its
        completion never reached the program: the kernel skipped it, see missed_events)."""
        counts: dict[tuple[str, str, str], dict[str, int]] = {}

        def entry(kdev: int, cls: int, op: int) -> dict[str, int]:
            name = device_name(kdev)
            devs.setdefault(name, f"{kdev >> 20}:{kdev & 0xFFFFF}")
            key = (name, CLASSES[cls] if cls < len(CLASSES) else f"class{cls}", OPS[op])
            return counts.setdefault(key, {"timed": 0, "unfinished": 0, **{w: 0 for w in BLK_ACCT}})

        for k, v in self._snap.get("blk_hist", []):
            if BLK_KINDS[k.kind] == "issue_to_complete":
                entry(k.dev, k.cls, k.op)["timed"] += v.value
        for k, v in self._snap.get("blk_acct", []):
            entry(k.dev, k.cls, k.op)[BLK_ACCT[k.what]] += v.value
        for k, v in self._snap.get("blk_issued", []):
            entry(k.dev, v.cls, v.op)["unfinished"] += 1
        out: dict[str, Any] = {}
        for (name, cls, op), c in sorted(counts.items()):
            out.setdefault(name, {}).setdefault(cls, {})[op] = c
        return out

    def _build_reclaim(self, comms: dict[int, str]) -> dict[str, Any]:
        latency = {kind: H.new_hist("usecs") for kind in RECLAIM_KINDS}
        per_pid_hist: dict[tuple[int, str], Any] = {}
        for k, v in self._snap.get("rc_hist", []):
            kind = RECLAIM_KINDS[k.kind]
            H.add(latency[kind], k.slot, v.value)
            H.add(per_pid_hist.setdefault((k.tgid, kind), H.new_hist("usecs")), k.slot, v.value)
        by_pid: dict[str, Any] = {}
        by_cg: dict[str, Any] = {}
        for k, v in self._snap.get("rc_stats", []):
            kind = RECLAIM_KINDS[k.kind]
            cg = self._cg_of.get(k.tgid, "(exited before it was resolved)")
            entry = {"count": v.count, "total_ns": v.ns, "pages_reclaimed": v.reclaimed}
            rec = by_pid.setdefault(str(k.tgid), {"comm": comms.get(k.tgid, ""), "memory_cgroup": cg})
            rec[kind] = {**entry, "hist": per_pid_hist.get((k.tgid, kind), H.new_hist("usecs"))}
            agg = by_cg.setdefault(cg, {}).setdefault(kind, {"count": 0, "total_ns": 0, "pages_reclaimed": 0,
                                                              "hist": H.new_hist("usecs")})
            for f in ("count", "total_ns", "pages_reclaimed"):
                agg[f] += entry[f]
            agg["hist"] = H.merge([agg["hist"], per_pid_hist.get((k.tgid, kind), H.new_hist("usecs"))])
        return {"latency": latency, "by_pid": by_pid, "by_cgroup": by_cg}

    def histograms(self) -> list[tuple[str, H.Hist]]:
        """(name, histogram) of every non-empty histogram, the unit of printing and plotting."""
        return list(iter_histograms(self.results()))

    def save(self, run: Any, plots: bool = True) -> list[Path]:
        """Write ebpf.json, ebpf.txt and one PNG per histogram (ebpf-*.png) into a results Run."""
        from ebpf.report import format_results

        res = self.results()
        paths = [run.write_json("ebpf", res), run.write_text("ebpf.txt", format_results(res) + "\n")]
        if plots:
            for name, h in iter_histograms(res):
                paths.append(H.plot(h, name, run.path / f"ebpf-{name.replace('/', '-')}.png"))
        return paths


def iter_histograms(res: dict[str, Any]) -> Iterator[tuple[str, H.Hist]]:
    blk = res.get("blk")
    if blk:
        for kind in BLK_KINDS:
            for dev, classes in sorted(blk[kind].items()):
                for cls, ops in sorted(classes.items()):
                    for op, h in sorted(ops.items()):
                        if h["count"]:
                            yield f"blk/{kind}/{dev}/{cls}/{op}", h
    rc = res.get("reclaim")
    if rc:
        for kind, h in rc["latency"].items():
            if h["count"]:
                yield f"reclaim/{kind}", h


@contextmanager
def session(probes: Sequence[str] = ("blk",), devices: Sequence[str] | None = None,
            pids: Sequence[int] | None = None, cgroups: Sequence[str] | None = None,
            follow_children: bool = True) -> Iterator[Recorder]:
    """`with session(...) as rec:` records around the block; rec.results() / rec.save(run) afterwards."""
    rec = Recorder(probes, devices, pids, cgroups, follow_children)
    rec.start()
    try:
        yield rec
    finally:
        if rec.bpf is not None or rec._ts is not None:
            rec.stop()
