"""The main job's stages: which kvds commands `kvds run` chains, and how each one's outcome is recorded.

Each stage runs the real command as a child process (`kvds <argv> --json`), so a stage that crashes or is
killed cannot take the suite down with it and its journal is restored by its own process. A stage is
skipped, with the doctor's reason, when a capability it needs is missing; exit status 3 (Unavailable) from
the command also counts as skipped, with the command's own reason.
"""

from __future__ import annotations

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


def missing_capability(stage: Stage) -> str | None:
    for name in stage.needs:
        c = doctor.capability(name)
        if not c.ok:
            return f"{name} {c.status}: {c.reason}"
    return None


def _tail(text: str, n: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def run_stage(stage: Stage, quick: bool, suite: Run, store: ResultStore) -> StageOutcome:
    """Run one stage as `kvds ...` and record its new result directories."""
    why = missing_capability(stage)
    argv = list(stage.quick if quick else stage.full)
    if why:
        return StageOutcome(stage.name, "skipped", why, argv=argv)
    tag = f"{suite.run_id}/{stage.name}"
    env = dict(os.environ, KVDS_RESULTS_DIR=str(store.root.resolve()), **{PARENT_ENV: tag})
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
    if rc == 0:
        return StageOutcome(stage.name, "ok", "", new, seconds, argv)
    if rc == 3:
        return StageOutcome(stage.name, "skipped", _tail(err), new, seconds, argv)
    return StageOutcome(stage.name, "failed", f"exit {rc}: {_tail(err)}", new, seconds, argv)


def stage_names(stages: list[Stage]) -> list[str]:
    return [s.name for s in stages]


def suite_runs(suite: Run, store: ResultStore) -> dict[str, list[Run]]:
    """The stage runs a suite recorded, by stage name."""
    out: dict[str, list[Run]] = {}
    for st in suite.read_json("stages").get("stages", []):
        out[st["name"]] = [store.get(str(suite.path.parent / rid)) for rid in st["runs"]
                           if (suite.path.parent / rid / "meta.json").exists()]
    return out


def relative(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)
