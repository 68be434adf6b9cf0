"""`kvds ebpf record` (harness/verbs.py's run shape): attach the probes, wait (a duration, or a command it starts
and follows), file an `ebpf-record` run and return its RecordSummary; ebpf/render.py prints it."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.knobs import scheduler_of
from harness.progress import progress, say
from harness.results import Filed, ResultStore

from ebpf.recorder import Recorder
from ebpf.summary import RecordSummary


@dataclass(frozen=True)
class RecordConfig:
    probes: tuple[str, ...]
    duration_s: float | None = None     # None with a command: until it exits
    command: tuple[str, ...] = ()       # record only this command and its children, while it runs
    devices: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    cgroups: tuple[str, ...] = ()
    plots: bool = True
    verbose: bool = False               # print the commands that built the BPF object loaded (stderr)


def run(cfg: RecordConfig) -> Filed[RecordSummary]:
    """Record; the run holds ebpf.json, ebpf.txt, the PNGs and summary.json (the summary returned)."""
    rec = Recorder(cfg.probes, devices=list(cfg.devices), pids=[] if cfg.command else (list(cfg.pids) or None),
                   cgroups=list(cfg.cgroups))
    config = {"probes": list(cfg.probes), "duration_s": cfg.duration_s,
              "command": list(cfg.command), "devices": list(cfg.devices), "pids": list(cfg.pids),
              "cgroups": list(cfg.cgroups), "scheduler": {d: _safe_scheduler(d) for d in cfg.devices}}
    filed = ResultStore().new_run("ebpf-record", config)
    say(f"loading and attaching {','.join(cfg.probes)} ...")
    rec.start()
    if rec.commands is not None:  # what ran underneath, kept with the run
        filed.update_meta(commands={"bpf_object": rec.commands})
        if cfg.verbose:
            _print_commands(rec.commands)
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
    paths = rec.save(filed, plots=cfg.plots)
    res = rec.results()
    summary = RecordSummary(rec.backend, rec.backend_detail, res["load_attach_s"], rec.compile_seconds,
                            res["duration_s"], status, {name: h["count"] for name, h in rec.histograms()},
                            {f"{dev}/{cls}/{op}": counts
                             for dev, classes in res.get("blk", {}).get("accounting", {}).items()
                             for cls, ops in classes.items() for op, counts in ops.items()},
                            probes=list(cfg.probes), plots=sum(1 for p in paths if Path(p).suffix == ".png"),
                            results=res)
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)


def _print_commands(commands: dict) -> None:
    """The BPF object loaded and the commands that built it, on stderr (--verbose)."""
    from ebpf.objects import shell_line

    lines = [shell_line(c) for c in commands["built_by"] or []] or [f"({commands['note']})"]
    print(f"BPF object {commands['object']}, built by:", *lines, sep="\n  ", file=sys.stderr)


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
