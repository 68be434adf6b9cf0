"""`kvds ebpf record`, shaped as the track template: cli.py parses arguments into one RecordConfig, `record` attaches
the probes, waits (a duration, or a command it starts), files the run and returns a Recording with its typed
summary; ebpf/report.py renders it, harness/emit.py prints it with --json."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from harness.knobs import scheduler_of
from harness.progress import progress, say
from harness.results import ResultStore, Run

from ebpf.recorder import Recorder


@dataclass(frozen=True)
class RecordConfig:
    probes: tuple[str, ...]
    duration_s: float | None = None     # None with a command: until it exits
    command: tuple[str, ...] = ()       # record only this command and its children, while it runs
    devices: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    cgroups: tuple[str, ...] = ()
    plots: bool = True


@dataclass(frozen=True)
class RecordSummary:
    """summary.json of an `ebpf-record` run."""
    backend: str | None            # the loader used: libbpf (runs filed before 2026-12-02 may say bcc)
    backend_detail: str            # libbpf: how the block events were hooked
    load_attach_s: float | None    # time to load and attach the probes
    compile_s: float | None        # libbpf: 0.0 when the object was cached
    duration_s: float | None       # how long events were recorded
    command_status: int | None     # the recorded command's exit status (None: a --duration recording)
    histograms: dict[str, int]     # events counted per histogram
    blk_accounting: dict[str, dict[str, int]]  # "dev/class/op" -> requests timed, unfinished (issued, never seen
    #                                completing), untimed (completion without its issue), overwritten, lost

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RecordSummary":
        """A stored summary.json read back (the report): a field an older kvds did not write is None; a key this
        version no longer has is dropped, so a reader names only fields that exist."""
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})

    def requests(self) -> tuple[int, int] | None:
        """(block requests timed, requests seen in all) over every device, class and op; None for a recording
        made before kvds accounted for them (or without the blk probe)."""
        if not self.blk_accounting:
            return None
        counts = list(self.blk_accounting.values())
        return sum(c["timed"] for c in counts), sum(sum(c.values()) for c in counts)


@dataclass
class Recording:
    run: Run
    summary: RecordSummary
    results: dict[str, Any]        # every histogram, as printed (ebpf/report.py format_results)
    pngs: int
    commands: dict[str, Any] | None  # libbpf: the BPF object loaded and the commands that built it


def record(cfg: RecordConfig) -> Recording:
    rec = Recorder(cfg.probes, devices=list(cfg.devices), pids=[] if cfg.command else (list(cfg.pids) or None),
                   cgroups=list(cfg.cgroups))
    config = {"probes": list(cfg.probes), "duration_s": cfg.duration_s,
              "command": list(cfg.command), "devices": list(cfg.devices), "pids": list(cfg.pids),
              "cgroups": list(cfg.cgroups), "scheduler": {d: _safe_scheduler(d) for d in cfg.devices}}
    run = ResultStore().new_run("ebpf-record", config)
    say(f"loading and attaching {','.join(cfg.probes)} ...")
    rec.start()
    if rec.commands is not None:  # what ran underneath, kept with the run
        run.update_meta(commands={"bpf_object": rec.commands})
    status = None
    try:
        if cfg.command:
            status = _run_command(rec, list(cfg.command))
        else:
            duration = cfg.duration_s or 0.0
            with progress(f"recording {duration:g} s", total=duration) as bar:
                end = time.monotonic() + duration
                while (left := end - time.monotonic()) > 0:
                    time.sleep(min(0.2, left))
                    bar.update(completed=duration - max(0.0, end - time.monotonic()))
    finally:
        rec.stop()
    paths = rec.save(run, plots=cfg.plots)
    res = rec.results()
    summary = RecordSummary(rec.backend, rec.backend_detail, res["load_attach_s"], rec.compile_seconds,
                            res["duration_s"], status, {name: h["count"] for name, h in rec.histograms()},
                            {f"{dev}/{cls}/{op}": counts
                             for dev, classes in res.get("blk", {}).get("accounting", {}).items()
                             for cls, ops in classes.items() for op, counts in ops.items()})
    run.write_summary(summary.as_dict())
    return Recording(run, summary, res, sum(1 for p in paths if Path(p).suffix == ".png"), rec.commands)


def _safe_scheduler(dev: str) -> str | None:
    try:
        return scheduler_of(dev)
    except Exception:
        return None


def _run_command(rec: Recorder, cmd: list[str]) -> int:
    """Fork CMD held at a gate until its pid is in the filter, so its first I/O is already counted.

    (subprocess.Popen cannot do this: it waits for the exec that the gate holds back.)
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: wait for the parent's go, then become CMD
        try:
            os.close(w)
            os.read(r, 1)
            os.close(r)
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            os.write(2, f"kvds: error: cannot run {cmd[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    os.close(r)
    try:
        rec.add_pid(pid)
    finally:
        os.write(w, b"x")
        os.close(w)
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: taskstats still answers
        rec.stop()
    finally:
        _, wstatus = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wstatus)
