"""Running one kvds command on many targets in parallel, each with its own progress line, and filing what
comes back in the local results store tagged by host.

Per ssh host: connect (known_hosts rules) -> find Python 3.11 -> ship and install kvds -> `kvds restore` for
anything an interrupted earlier run left (and fetch that run's partial results) -> `kvds doctor --json` ->
the command with --json -> fetch results/<run-id>/ dirs. A failure at any step marks that host failed with
the reason; the other hosts carry on, and whatever was already copied home stays.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.markup import escape

from harness import deferred_figures, progress
from harness.errors import Unavailable
from harness.knobs import workers
from harness.paths import work_dir
from harness.remote.args import SshOptions, with_json
from harness.remote.guest import GUEST_TIMEOUT_S, guest_runner
from harness.remote.scrub import scrub, scrub_obj
from harness.remote.ship import Payload, build_wheel
from harness.remote.sshhost import ConnectionLost, SshHost
from harness.remote.targets import GuestTarget, LocalTarget, SshTarget, Target
from harness.results import PARENT_ENV, ResultStore, Run

STAGES = ("connect", "python", "ship", "restore", "doctor", "run", "fetch", "done")


@dataclass
class HostOutcome:
    tag: str
    target: str
    status: str = "pending"  # ok | failed | unavailable
    stage: str = "connect"
    reason: str = ""
    exit_status: int | None = None
    events: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    doctor: list[dict[str, Any]] | None = None
    output: Any = None
    runs: list[str] = field(default_factory=list)
    partial_runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    kernel: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("doctor")  # stored as its own file
        return d


class HostLines:
    """One progress line per host (a rich bar on a terminal, plain '[host] stage' lines otherwise)."""

    def __init__(self, tags: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self._progress = None
        self._tasks: dict[str, Any] = {}
        if progress.enabled():
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]{task.fields[tag]:<18}"), BarColumn(bar_width=24),
                                      TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=progress.console)
            for t in tags:
                self._tasks[t] = self._progress.add_task("waiting", total=len(STAGES) - 1, tag=t)

    def __enter__(self) -> "HostLines":
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def stage(self, tag: str, stage: str, note: str = "") -> None:
        text = stage + (f": {note}" if note else "")
        with self._lock:
            if self._progress is not None:
                done = STAGES.index(stage) if stage in STAGES else None
                self._progress.update(self._tasks[tag], description=text,
                                      **({"completed": done} if done is not None else {}))
            else:
                if not getattr(progress, "_quiet", False):  # progress.say, without wrapping at 80 columns
                    progress.console.print(escape(f"[{tag}] {text}"), highlight=False, soft_wrap=True)


def _import_run(store: ResultStore, src: Callable[[Path], int], run_name: str, out: HostOutcome,
                invocation: str, partial: bool, why: str = "") -> str:
    """Copy one run directory into the store as <run-id>--<tag>, recording where it came from."""
    dest = store.root / f"{run_name}--{out.tag}"
    n = 1
    while dest.exists():
        n += 1
        dest = store.root / f"{run_name}--{out.tag}-{n}"
    part = dest.with_name(dest.name + ".partial")
    store.root.mkdir(parents=True, exist_ok=True)
    src(part)  # an interrupted copy stays as *.partial: kept, never mistaken for a whole run
    origin = {"host": out.tag, "target": out.target, "invocation": invocation, "remote_run_id": run_name,
              "partial": partial, "fetched_unix_time": time.time()}
    if why:
        origin["note"] = why
    if (part / "meta.json").exists():
        run = Run(part)
        # a run filed for a `kvds run` stage belongs to that stage, like the invocation record (harness/suite.py)
        parent = {"parent": os.environ[PARENT_ENV]} if os.environ.get(PARENT_ENV) else {}
        try:
            run.update_meta(remote=origin, **parent)
        except (json.JSONDecodeError, OSError):
            origin["meta_unreadable"] = True
    drawn = deferred_figures.draw_owed(Run(part))
    if drawn:
        origin["figures_drawn_on_filing"] = drawn
    Run(part).write_json("remote.json", origin)
    part.rename(dest)
    return dest.name


class Executor:
    def __init__(self, argv: Sequence[str], targets: Sequence[Target], opts: SshOptions, store: ResultStore,
                 record: Run, with_doctor: bool = True, json_flag: bool = True, guest_lab: str = "debug",
                 guest_timeout_s: float = GUEST_TIMEOUT_S) -> None:
        self.argv = list(argv)
        self.guest_lab = guest_lab  # the lab kernel the command's track asked for (harness/remote/guest.py)
        self.guest_timeout_s = guest_timeout_s  # harness/remote/guest.py guest_timeout
        self.json_flag = json_flag
        self.targets, self.opts, self.store, self.record = list(targets), opts, store, record
        self.with_doctor = with_doctor and self.argv[:1] != ["doctor"]
        self.invocation = record.run_id
        self.payload: Payload | None = None
        self.lines: HostLines | None = None

    def _stepper(self, out: HostOutcome) -> Callable[..., None]:
        """A function announcing the next stage of one host (and timing the one before)."""
        t_prev = [time.monotonic()]

        def step(stage: str, note: str = "") -> None:
            now = time.monotonic()
            out.stage_seconds[out.stage] = round(out.stage_seconds.get(out.stage, 0.0) + now - t_prev[0], 2)
            t_prev[0] = now
            out.stage = stage
            self.lines.stage(out.tag, stage, note)

        return step

    def _host_argv(self) -> list[str]:
        return with_json(self.argv) if self.json_flag else list(self.argv)

    # -- per-target workers -------------------------------------------------------------------------------
    def _ssh(self, t: SshTarget, out: HostOutcome) -> None:
        host = SshHost(t, self.opts)
        step = self._stepper(out)
        try:
            step("connect", t.describe())
            host.connect()
            out.events += host.events
            step("python")
            py = host.find_python()
            out.kernel = py.get("kernel", "")
            step("ship")
            out.events.append(host.install(self.payload))
            step("restore")
            for rep in host.restore_leftovers(self.invocation):
                if rep.get("undone") or rep.get("failed"):
                    out.restored += [f"restored {u}" for u in rep.get("undone", [])]
                    out.restored += [f"FAILED to restore {f}" for f in rep.get("failed", [])]
            if out.restored:
                out.events.append(f"kvds restore on connect: {len(out.restored)} change(s) left by an interrupted "
                                  "kvds run were put back")
            for inv in host.unfetched_invocations(self.invocation):
                for name in host.run_dirs(inv):
                    src = host.results_dir(inv) + "/" + name
                    out.partial_runs.append(_import_run(
                        self.store, lambda dest, s=src: host.fetch_tree(s, dest), name, out, inv, partial=True,
                        why="left by an interrupted invocation; fetched on the next connection"))
                host.mark_fetched(inv, remove=True)
            if self.with_doctor:
                step("doctor")
                res = host.kvds(["doctor", "--json"], self.invocation + "-doctor", "kvds doctor")
                out.doctor = capabilities(_json_or_none(res.stdout))
                host.sh("rm -rf " + shlex.quote(host.results_dir(self.invocation + "-doctor")), root=True, what="cleaning up")
            step("run", "kvds " + " ".join(self.argv))
            res = host.kvds(self._host_argv(), self.invocation, "the command")
            out.exit_status = res.exited
            self._keep_output(out, res.stdout, res.stderr)
            step("fetch")
            for name in host.run_dirs(self.invocation):
                src = host.results_dir(self.invocation) + "/" + name
                out.runs.append(_import_run(self.store, lambda dest, s=src: host.fetch_tree(s, dest), name, out,
                                            self.invocation, partial=False))
            host.mark_fetched(self.invocation, remove=True)
            out.status = "ok" if res.exited == 0 else "failed"
            if res.exited != 0:
                out.reason = f"kvds exited {res.exited}: {_last_line(res.stderr)}"
            step("done", out.reason or "ok")
        except ConnectionLost as exc:
            out.status, out.reason = "failed", (f"{exc}; partial results, if any, are fetched and its journal restored "
                                                "(kvds restore) on the next connection to this host")
            self.lines.stage(out.tag, "FAILED", out.reason)
        finally:
            out.events += [e for e in host.events if e not in out.events]
            host.close()

    def _local(self, out: HostOutcome) -> None:
        step = self._stepper(out)
        tmp = work_dir() / "remote-local" / self.invocation
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "KVDS_RESULTS_DIR": str(tmp), "KVDS_NO_PROGRESS": "1"}
        base = [sys.executable, "-m", "harness.cli"]
        out.kernel = os.uname().release
        try:
            if self.with_doctor:
                step("doctor")
                r = subprocess.run(base + ["doctor", "--json"], capture_output=True, text=True, env=env)
                out.doctor = capabilities(_json_or_none(r.stdout))
            step("run", "kvds " + " ".join(self.argv))
            r = subprocess.run(base + self._host_argv(), capture_output=True, text=True, env=env)
            out.exit_status = r.returncode
            self._keep_output(out, r.stdout, r.stderr)
            step("fetch")
            for d in sorted(p for p in tmp.iterdir() if p.is_dir()):
                out.runs.append(_import_run(self.store, lambda dest, s=d: (shutil.copytree(s, dest), 0)[1], d.name,
                                            out, self.invocation, partial=False))
            out.status = "ok" if r.returncode == 0 else "failed"
            if r.returncode != 0:
                out.reason = f"kvds exited {r.returncode}: {_last_line(r.stderr)}"
            step("done", out.reason or "ok")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _guest(self, out: HostOutcome) -> None:
        runner = guest_runner(self.guest_lab, self.guest_timeout_s)
        out.stage = "run"
        self.lines.stage(out.tag, "run", "kvds " + " ".join(self.argv) + " (in the QEMU guest)")
        result = runner(self._host_argv(), lambda line: self.lines.stage(out.tag, "run", line))
        try:
            out.exit_status = result.exit_status
            self._keep_output(out, result.stdout, result.stderr)
            for d in result.run_dirs:
                out.runs.append(_import_run(self.store, lambda dest, s=d: (shutil.copytree(s, dest), 0)[1], d.name,
                                            out, self.invocation, partial=False))
        finally:
            result.cleanup()
        out.status = "ok" if result.exit_status == 0 else "failed"
        out.reason = ("" if result.exit_status == 0
                      else f"kvds exited {result.exit_status} in the guest: {_last_line(result.stderr)}")
        self.lines.stage(out.tag, "done", out.reason or "ok")

    def _keep_output(self, out: HostOutcome, stdout: str, stderr: str) -> None:
        out.output = _json_or_none(stdout)
        d = f"hosts/{out.tag}"
        if out.output is None and stdout.strip():
            self.record.write_text(f"{d}/stdout.txt", scrub(stdout))
        if stderr.strip():
            self.record.write_text(f"{d}/stderr.txt", scrub(stderr))

    def _one(self, t: Target) -> HostOutcome:
        out = HostOutcome(tag=t.tag, target=t.describe())
        t0 = time.monotonic()
        try:
            if isinstance(t, SshTarget):
                self._ssh(t, out)
            elif isinstance(t, LocalTarget):
                self._local(out)
            elif isinstance(t, GuestTarget):
                self._guest(out)
        except Unavailable as exc:
            out.status, out.reason = "unavailable", scrub(str(exc))
            self.lines.stage(out.tag, "UNAVAILABLE", out.reason)
        except Exception as exc:  # any other failure is this host's, never the whole run's
            out.status = "failed"
            out.reason = scrub(f"{out.stage}: {exc}" if str(exc) else f"{out.stage}: {type(exc).__name__}")
            self.lines.stage(out.tag, "FAILED", out.reason)
        out.seconds = round(time.monotonic() - t0, 2)
        out.events = [scrub(e) for e in out.events]
        out.output = scrub_obj(out.output)
        if out.doctor is not None:
            self.record.write_json(f"hosts/{out.tag}/doctor.json", scrub_obj(out.doctor))
        if out.output is not None:
            self.record.write_json(f"hosts/{out.tag}/output.json", out.output)
        return out

    # -- all targets ----------------------------------------------------------------------------------------
    def run(self) -> list[HostOutcome]:
        if any(isinstance(t, SshTarget) for t in self.targets):
            progress.say("building the kvds wheel from this checkout")
            self.payload = build_wheel()
        with HostLines([t.tag for t in self.targets]) as lines:
            self.lines = lines
            try:
                with ThreadPoolExecutor(max_workers=len(self.targets)) as pool:
                    try:
                        outcomes = list(pool.map(self._one, self.targets))
                    except BaseException:  # SIGINT/SIGTERM: the pool's shutdown joins threads that wait on guests,
                        workers.end_waited()  # so the guests are killed first (kvds does not wait for them)
                        raise
            finally:
                workers.reopen_waited()
        self.record.write_summary({"argv": self.argv, "invocation": self.invocation,
                                   "hosts": {o.tag: o.as_dict() for o in outcomes}})
        return outcomes


def capabilities(doc: Any) -> Any:
    """The capability rows of a host's `kvds doctor --json` (harness/emit.py's envelope), else doc unchanged."""
    if isinstance(doc, dict) and isinstance(doc.get("summary"), dict) and "capabilities" in doc["summary"]:
        return doc["summary"]["capabilities"]
    return doc


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return scrub(lines[-1]) if lines else "no error output"
