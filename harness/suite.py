"""The main job's stages: which kvds commands `kvds run` chains, and how each one's outcome is recorded.

Each stage runs the real command as a child process (`kvds <argv> --json`), so a stage that crashes or is
killed cannot take the suite down with it and its journal is restored by its own process.

A stage is *skipped* only when `kvds doctor` reports a capability it needs missing (the doctor's reason is the
stage's reason) or on request (`--skip`). Everything else that did not run is *failed*: a capability in error
(a kvds bug), a capability CI=true expects of this kind of host, exit 3 (Unavailable) from a command whose
capabilities the doctor reports available (the doctor and the command disagree: one of them is wrong), any
other non-zero exit, and exit 0 from a command that should have filed a result and filed none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import doctor
from harness.results import PARENT_ENV, ResultStore, Run


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    quick: tuple[str, ...]
    full: tuple[str, ...]
    needs: tuple[str, ...] = ()
    timeout_s: float = 1800
    files_run: bool = True  # the command files a result directory; exit 0 without one means it did not run
    env: tuple[tuple[str, str], ...] = ()  # set for the command (e.g. KVDS_GUEST_CLOCK=icount for a guest stage)


@dataclass
class StageOutcome:
    name: str
    status: str  # ok | skipped | failed
    reason: str = ""
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    argv: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tail(text: str, n: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def run_stage(stage: Stage, quick: bool, suite: Run, store: ResultStore) -> StageOutcome:
    """Run one stage as `kvds ...` and record its new result directories."""
    argv = list(stage.quick if quick else stage.full)
    action, why = doctor.gate(*stage.needs)
    if action == "skip":
        return StageOutcome(stage.name, "skipped", why, argv=argv)
    if action == "fail":
        return StageOutcome(stage.name, "failed", why.splitlines()[0], argv=argv)
    tag = f"{suite.run_id}/{stage.name}"
    env = dict(os.environ, **dict(stage.env), KVDS_RESULTS_DIR=str(store.root.resolve()), **{PARENT_ENV: tag})
    cmd = [sys.executable, "-m", "harness.cli", *argv]
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=stage.timeout_s)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -1, exc.stdout or "", f"timed out after {stage.timeout_s:.0f} s"
        out = out if isinstance(out, str) else out.decode(errors="replace")
    seconds = time.monotonic() - t0
    suite.write_text(f"logs/{stage.name}.stdout", out)
    suite.write_text(f"logs/{stage.name}.stderr", err if isinstance(err, str) else str(err))
    new = sorted(r.run_id for r in store.runs() if r.meta.get("parent") == tag)
    why = _tail(err if isinstance(err, str) else str(err)) or _json_failure(out)
    return StageOutcome(stage.name, *_judge(stage, rc, why, new), new, seconds, argv)


def _json_failure(out: str) -> str:
    """The "failure" a command put in its --json document (commands that fail without a word on stderr)."""
    try:
        doc = json.loads(out)
    except ValueError:
        return _tail(out)
    if not isinstance(doc, dict):
        return ""
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}  # the one shape (harness/emit.py)
    return str(doc.get("failure") or summary.get("failure") or "")


def _judge(stage: Stage, rc: int, tail: str, new: list[str]) -> tuple[str, str]:
    """(status, reason) of a stage the doctor said could run, from its exit status and what it filed."""
    needs = ", ".join(stage.needs) or "none"
    if rc == 0 and stage.files_run and not new:
        return "failed", f"exit 0 but filed no result: {tail}"
    if rc == 0:
        return "ok", ""
    if rc == 3:
        return "failed", (f"exit 3 (unavailable) although kvds doctor reports the capabilities this stage needs "
                          f"({needs}) available: {tail}")
    return "failed", f"exit {rc}: {tail}"


def relative(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)
