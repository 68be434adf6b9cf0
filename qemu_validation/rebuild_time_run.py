"""`kvds qemu rebuild-time`: what a kernel developer waits for after editing a patch: rebuild, boot and validate.

Each repetition appends a one-line patch (a comment carrying a fresh nonce, inserted near the top of
mm/mm_intent.c so every later line moves and the object really recompiles, not a ccache hit) to the mm_intent
series, builds that new key in the warm workspace, and runs `validate` on it: the full profile (the
gate) by default, or `quick` (validate_run.PROFILES: every check, fewer random lines, a 5 s concurrent phase), the
loop a developer runs while editing. Build and boot+validate are timed separately, and the guest's time is
broken down by phase (qemu_validation/validate_timeline.py); the kernels it builds are removed afterwards, so the cache
holds only real builds. `source` times another kernel (a 6.8 tarball) in its own warm tree.

Runs are stored under the kind KIND; runs stored before the verb had its name (`kvds qemu bench`) have the kind
LEGACY_KIND, which the report still reads (KINDS: the newest run of either is the one shown).

The goal (edit -> validated kernel within GOAL_SECONDS) is judged by harness.stats' one rule from the mean
total time's t interval over repetitions; a repetition whose validation failed makes the goal missed whatever
the times: a fast kernel that does not validate is not what a developer waits for.
"""

from __future__ import annotations

import difflib
import secrets
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.progress import say
from harness.results import Filed, ResultStore, StoredSummary
from qemu_validation import validate_run
from qemu_validation.boot import guest_command
from qemu_validation.kernel import build, cachedirs
from qemu_validation.kernel.source import git

TARGET_FILE = "mm/mm_intent.c"
GOAL_SECONDS = 90.0
KIND = "qemu-rebuild-time"
LEGACY_KIND = "qemu-bench"
"""The kind of runs stored before `kvds qemu bench` was renamed `kvds qemu rebuild-time` (read by the report only)."""
KINDS = (KIND, LEGACY_KIND)


@dataclass(frozen=True)
class RebuildTimeConfig:
    """What one `kvds qemu rebuild-time` times: `reps` edit -> rebuild -> boot -> validate cycles of `source`'s
    debug kernel."""
    reps: int = 3
    fuzz: int | None = None                # None: the profile's random malformed lines
    timeout: float = 600.0                 # per validate boot
    profile: str = "full"                  # validate_run.PROFILES: full (the gate) or quick (the edit loop)
    source: str = build.DEFAULT_SOURCE


@dataclass(frozen=True)
class RebuildTimeSummary(StoredSummary):
    """summary.json of a `qemu-rebuild-time` run (and `kvds qemu rebuild-time --json`'s summary)."""
    reps: list[dict[str, Any]]             # per repetition: build and boot+validate seconds, files compiled
    median_total_seconds: float            # edit -> validated kernel, median over reps
    max_total_seconds: float               # the slowest rep
    goal_seconds: float                    # the goal (GOAL_SECONDS)
    median_build_seconds: float            # rebuild, median over reps
    median_boot_validate_seconds: float    # boot + validate, median
    mean_total_seconds: dict[str, Any]     # stats.Estimate.as_dict(): mean with its interval over repetitions
    goal: dict[str, Any]                   # stats.Verdict.as_dict()
    goal_text: str                         # the verdict as printed
    goal_met: bool                         # the whole interval is within the goal
    all_validated: bool                    # every rep passed validate
    profile: str                           # validate profile: full (the gate) or quick
    gate: bool                             # the full profile was used
    counts: dict[str, int]                 # fuzz, valid, concurrent_s per validate
    median_guest_phases: list[dict[str, Any]]  # guest-clock phases, median over reps
    base_kernel: dict[str, Any]            # id, label, release, source


def nonce_patch(original: str, nonce: str) -> str:
    """A `git am`-style mail adding one comment line after the first line of mm/mm_intent.c."""
    old = original.splitlines(keepends=True)
    new = old[:1] + [f"/* kvds qemu rebuild-time: {nonce} */\n"] + old[1:]
    diff = "".join(difflib.unified_diff(old, new, f"a/{TARGET_FILE}", f"b/{TARGET_FILE}", n=3))
    return (f"From: kvds <kvds@example.invalid>\nSubject: [PATCH] kvds rebuild-time: touch {TARGET_FILE} ({nonce})\n\n"
            f"---\ndiff --git a/{TARGET_FILE} b/{TARGET_FILE}\n{diff}")


def _file_at(kb: build.KernelBuild, path: str) -> str:
    tree = cachedirs.workspaces() / kb.info["workspace"] / "linux"
    return git("show", f"{kb.info['commit']}:{path}", cwd=tree) + "\n"


def run(cfg: RebuildTimeConfig) -> Filed[RebuildTimeSummary]:
    """Time `cfg.reps` edit -> rebuild -> boot -> validate cycles on top of the (built) debug kernel of
    `cfg.source`. `cfg.fuzz` overrides the profile's number of random malformed lines."""
    reps, timeout, profile, source = cfg.reps, cfg.timeout, cfg.profile, cfg.source
    prof = validate_run.PROFILES[profile]
    fuzz = prof.fuzz if cfg.fuzz is None else cfg.fuzz
    base_spec = build.BuildSpec(source=source, patches=guest_command.DEFAULT_SPEC.patches, kasan=True,
                                fragments=guest_command.DEFAULT_SPEC.fragments)
    base = build.ensure_built(base_spec, say=say)    # built (not timed) the first time; says so when it builds
    validate_run.validator_binary()
    say(f"base: {base.label} ({base.id}); {profile} validate, {reps} repetition(s)")
    run = ResultStore().new_run(KIND, {"reps": reps, "profile": profile, "fuzz": fuzz, "valid": prof.valid,
                                       "concurrent": prof.concurrent, "base_kernel": base.id, "source": source,
                                       "patches": list(base_spec.patches), "touched": TARGET_FILE})
    original = _file_at(base, TARGET_FILE)
    rows = []
    for rep in range(reps):
        with tempfile.TemporaryDirectory(prefix="kvds-rebuild-time-series-") as tmp:
            series = Path(tmp)
            nonce = secrets.token_hex(6)
            (series / "0001-kvds-rebuild-time.patch").write_text(nonce_patch(original, nonce))
            spec = build.BuildSpec(source=base_spec.source, patches=(*base_spec.patches, str(series)),
                                   kasan=base_spec.kasan, fragments=base_spec.fragments)
            say(f"rep {rep + 1}/{reps}: rebuild with {TARGET_FILE} touched ({nonce}), boot, validate")
            t0 = time.monotonic()
            kb = build.ensure_built(spec, say=say)
            t_build = time.monotonic() - t0
            compiled = [line.split()[-1] for line in (kb.dir / "build.log").read_text().splitlines()
                        if line.startswith("  CC ")]
            try:
                validated = validate_run.run(validate_run.ValidateConfig(kernel=kb.id, fuzz=fuzz, valid=prof.valid,
                                                                         concurrent=prof.concurrent, timeout=timeout))
                summary, vrun = validated.summary, validated.run
                t_total = time.monotonic() - t0
            finally:
                shutil.rmtree(kb.dir, ignore_errors=True)
                kb.dir.with_name(kb.dir.name + ".lock").unlink(missing_ok=True)
        rows.append({"rep": rep + 1, "nonce": nonce, "kernel": kb.id, "incremental": kb.info.get("incremental"),
                     "build_seconds": round(t_build, 1), "build_phases": kb.info.get("phases"), "compiled": compiled,
                     "boot_validate_seconds": round(t_total - t_build, 1), "total_seconds": round(t_total, 1),
                     "guest_seconds": summary.boot["seconds"], "validate_ok": summary.ok,
                     "malformed_writes": summary.malformed_writes, "valid_writes": summary.valid_writes,
                     "splats": summary.splats, "guest_phases": summary.phases,
                     "validate_failure": summary.failure, "validate_run": vrun.run_id})
        say(f"  build {t_build:.1f} s + boot/validate {t_total - t_build:.1f} s = {t_total:.1f} s "
            f"({'PASS' if summary.ok else 'FAIL'})")
    totals = [r["total_seconds"] for r in rows]
    v = verdict(rows, profile)
    out = RebuildTimeSummary(
        reps=rows, median_total_seconds=round(statistics.median(totals), 1),
        max_total_seconds=max(totals), goal_seconds=GOAL_SECONDS,
        median_build_seconds=round(statistics.median(r["build_seconds"] for r in rows), 1),
        median_boot_validate_seconds=round(statistics.median(r["boot_validate_seconds"] for r in rows), 1),
        mean_total_seconds=v.estimate.as_dict(), goal=v.as_dict(), goal_text=str(v),
        goal_met=v.met, all_validated=all(r["validate_ok"] for r in rows),
        profile=profile, gate=validate_run.is_gate(fuzz, prof.valid, prof.concurrent),
        counts={"fuzz": fuzz, "valid": prof.valid, "concurrent_s": prof.concurrent},
        median_guest_phases=median_phases([r["guest_phases"] for r in rows]),
        base_kernel={"id": base.id, "label": base.label, "release": base.info.get("kernel_release"),
                     "source": source})
    run.write_summary(out.as_dict())
    return Filed(run, out)


def exit_status(summary: RebuildTimeSummary) -> int:
    """0 when every repetition's kernel validated, else 1 (the goal is judged apart: see the summary's goal)."""
    return 0 if summary.all_validated else 1


def median_phases(per_rep: list[list[dict]]) -> list[dict]:
    """Each phase's median over the repetitions that recorded it, in the order the phases ran."""
    order: list[str] = []
    seen: dict[str, list[float]] = {}
    for phases in per_rep:
        for p in phases:
            if p["phase"] not in seen:
                order.append(p["phase"])
                seen[p["phase"]] = []
            seen[p["phase"]].append(p["seconds"])
    return [{"phase": name, "seconds": round(statistics.median(seen[name]), 2), "reps": len(seen[name])}
            for name in order]


def verdict(rows: list[dict], profile: str = "full") -> stats.Verdict:
    """Edit -> rebuild -> boot -> validate within GOAL_SECONDS: from the mean total's interval over repetitions,
    and never met when any repetition failed validation. The goal names the validate profile it was timed with."""
    est = stats.mean_ci([r["total_seconds"] for r in rows], floor=0.0)
    v = stats.judge_at_most(est, GOAL_SECONDS, f"edit -> validated kernel, {profile} validate (s) ")
    failed = [str(r["rep"]) for r in rows if not r.get("validate_ok")]
    if failed:
        return stats.verdict_of(stats.MISSED, v.goal, est, f"validation failed in repetition {', '.join(failed)}")
    return v
