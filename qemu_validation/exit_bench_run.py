"""`kvds qemu exit-bench`: what mm_intent costs the process exit path, measured inside the guest kernel.

guest/exit_bench.c times fork + exit + wait of a child with the registry unused since boot, used by one other
process, and used by 257 processes holding 1,025 intents; then munmap() of one page in an address space with 256
other intents (the page untagged, or with an intent of its own) and of an address space's only intent, the
unmap hook's three paths. Raw per-iteration samples are reduced in the guest to median, p90 and mean. One boot is one repetition: several kernels (the series, the series before a change, a
kernel without the series: the floor) are booted `reps` times each in alternating order, and each state's
figure is the mean of the per-boot medians with a t interval over boots (harness.stats.mean_ci). Two states
of one kernel are compared boot by boot (the geometric mean of per-boot ratios, t interval on the logs); two
kernels by the ratio of their means (harness.stats.rep_mean_ratio, each side resampled by boot). Each ratio is
read by the project's one rule: higher or lower only when the whole interval says so, otherwise not
measurably different.

The debug kernel (KASAN, lockdep, kmemleak) measures its instrumentation as much as the exit path; `--config
base` builds the same series without it, the configuration the exit path's cost is about. On a kernel
without mm_intent the program still runs every state (the holders exist, their registrations fail), which is
the floor the series is measured against.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.errors import UserError
from harness.progress import say
from harness.report import fmt
from harness.results import Filed, ResultStore, Run, StoredSummary
from qemu_validation import validate_timeline
from qemu_validation.boot import guest_command, guest_programs
from qemu_validation.kernel import build

SOURCE = Path(__file__).resolve().parent / "guest" / "exit_bench.c"
GUEST_PATH = "bin/exit_bench"
REGISTER = "/sys/kernel/debug/mm_intent/register"
EXIT_STATES = ("unused", "one", "many")     # fork + exit + wait; "warmup" is printed too, and not compared
UNMAP_STATES = ("unmap_untagged", "unmap_tagged", "unmap_last")   # munmap() of one page
STATES = EXIT_STATES + UNMAP_STATES
EXPECTED_HELD = 1 + 256 * 4                  # exit_bench.c: one intent + HOLDERS * PER_HOLDER
_LINE = re.compile(r"^exit_bench (\w+) n=(\d+) median_ns=(\d+) p90_ns=(\d+) mean_ns=(\d+)$", re.M)
_HELD = re.compile(r"^exit_bench intents_held=(\d+) processes_holding=(\d+)$", re.M)
_UNMAPPED = re.compile(r"^exit_bench unmap_registered=(\d+) of (\d+)$", re.M)


@dataclass(frozen=True)
class ExitBenchConfig:
    """What `kvds qemu exit-bench` was asked: the builds to boot (none: `spec` is built), how much per boot."""
    kernels: tuple[str, ...] = ()
    spec: build.BuildSpec | None = None      # None: the debug mm_intent kernel (guest_command.DEFAULT_SPEC)
    iterations: int = 2000                    # fork+exit per state per boot
    reps: int = 3                             # boots per kernel, in alternating order
    timeout: float = 900.0                    # seconds before a hung guest is killed

    def __post_init__(self) -> None:
        """Bad counts are the user's error, refused where the config is made (before anything boots)."""
        if self.iterations < 10:
            raise UserError("--iterations must be at least 10 (a median and a p90 from fewer say nothing)")
        if self.reps < 1:
            raise UserError("--reps must be at least 1")


@dataclass(frozen=True)
class ExitBenchSummary(StoredSummary):
    """summary.json of a `qemu-exit-bench` run (and `kvds qemu exit-bench --json`'s summary)."""
    iterations: int                        # fork+exit+wait per state per boot
    kernels: list[dict[str, Any]]      # per kernel: median_ms per state (mean of per-boot medians), vs_unused ratios
    comparisons: list[dict[str, Any]]  # each later kernel / the first, per state
    boots: list[dict[str, Any]]        # every boot, in the order it ran
    ok: bool                           # every boot usable
    failure: str | None                # the first boot's reason when not ok


def binary() -> Path:
    return guest_programs.static_binary(SOURCE)


def parse(text: str) -> dict:
    states = {m.group(1): {"n": int(m.group(2)), "median_ns": int(m.group(3)), "p90_ns": int(m.group(4)),
                           "mean_ns": int(m.group(5))} for m in _LINE.finditer(text)}
    held = _HELD.search(text)
    unmapped = _UNMAPPED.search(text)
    return {"states": states, "intents_held": int(held.group(1)) if held else None,
            "processes_holding": int(held.group(2)) if held else None,
            "unmap_states_registered": int(unmapped.group(1)) if unmapped else None}


def bench_argv(iterations: int) -> list[str]:
    """Record whether the kernel has mm_intent, then run the benchmark with its status kept."""
    return ["sh", "-c", f"if [ -e {REGISTER} ]; then echo 1; else echo 0; fi > /share/feature.txt; "
                        f"/{GUEST_PATH} {iterations} > /share/out.txt; echo $? > /share/status.txt; "
                        "read up _ < /proc/uptime; echo $up > /share/uptime.txt"]


def boot_ok(parsed: dict, feature: bool, status: int | None, guest_uptime: float | None = None,
            host_seconds: float | None = None) -> str | None:
    """Why one boot's figures cannot be used (None when they can). Without mm_intent the holders' registrations
    fail, so the program holds 0 intents and exits 1; with it every registration must succeed and it exits 0.
    A guest whose clock ran faster than the host's (more uptime than QEMU ran) timed everything wrong."""
    if guest_uptime is not None and host_seconds and guest_uptime > host_seconds * validate_timeline.CLOCK_TOLERANCE:
        return (f"the guest's clock ran {guest_uptime / host_seconds:.2f}x the host's ({guest_uptime:.1f} s of uptime "
                f"in {host_seconds:.1f} s): its TSC was miscalibrated, its timings are wrong")
    missing = [s for s in STATES if s not in parsed["states"]]
    if missing:
        return f"states missing from the output: {', '.join(missing)}"
    if feature:
        if status != 0 or parsed["intents_held"] != EXPECTED_HELD:
            return (f"held {parsed['intents_held']} intents of {EXPECTED_HELD}, registered "
                    f"{parsed['unmap_states_registered']} of {len(UNMAP_STATES)} unmap states (exit status {status})")
    elif parsed["intents_held"] != 0 or parsed["unmap_states_registered"] != 0 or status not in (0, 1):
        return (f"no mm_intent in this kernel, yet {parsed['intents_held']} intents were held and "
                f"{parsed['unmap_states_registered']} unmap states registered (status {status})")
    return None


def difference(e: stats.Estimate) -> str:
    """A ratio read by the one rule: higher/lower only when its whole interval is on that side of 1; without an
    interval (one repetition) inconclusive, with the estimate as harness.report.fmt prints it."""
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return f"inconclusive: {fmt.estimate(e.as_dict())}"
    if e.lo > 1.0:
        return "higher"
    if e.hi < 1.0:
        return "lower"
    return "not measurably different"


def _ratio(a: list[float], b: list[float]) -> dict:
    """Two kernels (different boots): mean(a) / mean(b), each side resampled by boot."""
    est = stats.rep_mean_ratio(a, b)
    return {**est.as_dict(), "text": str(est), "difference": difference(est)}


def paired_ratio(a: list[float], b: list[float]) -> stats.Estimate:
    """Two states of one kernel, measured in the same boots: the geometric mean of the per-boot ratios a/b with
    a t interval on their logarithms, so a slow boot (the host's load) cancels out of its own ratio."""
    pairs = [math.log(x / y) for x, y in zip(a, b) if x > 0 and y > 0]
    e = stats.mean_ci(pairs)
    ex = lambda v: math.exp(v) if math.isfinite(v) else math.nan  # noqa: E731
    return stats.Estimate(ex(e.value), ex(e.lo), ex(e.hi), e.conf, e.reason, len(pairs))


def _paired(a: list[float], b: list[float]) -> dict:
    est = paired_ratio(a, b)
    return {**est.as_dict(), "text": str(est), "difference": difference(est),
            "boots_higher": sum(1 for x, y in zip(a, b) if x > y), "boots": min(len(a), len(b))}


def boot_outputs(share: Path) -> tuple[Callable[[str], str], int | None, float | None]:
    """What a guest bench's boot left in its share: a reader of its files ("" when absent), the program's exit
    status and the guest's uptime at the end (None when missing or unreadable: boot_ok says why)."""
    read = lambda name: (share / name).read_text().strip() if (share / name).exists() else ""  # noqa: E731
    status = int(read("status.txt")) if read("status.txt").isdigit() else None
    try:
        uptime: float | None = float(read("uptime.txt"))
    except ValueError:
        uptime = None
    return read, status, uptime


def _one_boot(kb: build.KernelBuild, rep: int, iterations: int, timeout: float, run: Run) -> dict:
    share = run.path / "guest" / f"{kb.id[:12]}-rep{rep + 1}"
    share.mkdir(parents=True)
    say(f"rep {rep + 1}: {kb.label} ({kb.id}), {iterations} fork+exit per state under TCG")
    res = guest_command.boot_and_run(kb.id, bench_argv(iterations), share, timeout=timeout,
                                     files={GUEST_PATH: binary()},
                              log_dir=share)
    record_boot_argv(run, kb.id, rep, res.qemu_argv)
    (share / "initramfs.cpio").unlink(missing_ok=True)
    read, status, uptime = boot_outputs(share)
    parsed = parse(read("out.txt"))
    feature = read("feature.txt") == "1"
    why = res.failure or boot_ok(parsed, feature, status, uptime, res.seconds)
    return {"rep": rep + 1, "kernel": kb.id, "mm_intent": feature, "status": status, "ok": why is None,
            "failure": why, "seconds": round(res.seconds, 1), "guest_uptime": uptime, **parsed}


def record_boot_argv(run: Run, kernel_id: str, rep: int, argv: list[str]) -> None:
    """File one boot's QEMU command line in the run's meta.json (commands.qemu_boots, in boot order), as soon as
    it ran, so a bench that dies later still says what it started."""
    commands = dict(run.meta.get("commands") or {})
    commands["qemu_boots"] = [*commands.get("qemu_boots", []), {"kernel": kernel_id, "rep": rep + 1, "argv": argv}]
    run.update_meta(commands=commands)


def summarize(kernels: list[build.KernelBuild], boots: list[dict], iterations: int) -> ExitBenchSummary:
    """Per kernel and state: mean of per-boot medians with its interval; ratios to the unused state (fork +
    exit), to the untagged unmap (munmap) and to the first kernel, each with its reading by the one rule."""
    rows = []
    for kb in kernels:
        mine = [b for b in boots if b["kernel"] == kb.id and b["ok"]]
        med = {s: [b["states"][s]["median_ns"] / 1e6 for b in mine] for s in STATES}
        rows.append({"id": kb.id, "label": kb.label, "debug": kb.kasan, "release": kb.info.get("kernel_release"),
                     "source": kb.info.get("source"), "series": [p["file"] for p in kb.info.get("patches", [])],
                     "mm_intent": any(b["mm_intent"] for b in mine), "boots": len(mine),
                     "median_ms": {s: {**stats.mean_ci(v, floor=0.0).as_dict(), "per_boot": v,
                                       "text": str(stats.mean_ci(v, floor=0.0))} for s, v in med.items()},
                     "p90_ms_per_boot": {s: [b["states"][s]["p90_ns"] / 1e6 for b in mine] for s in STATES},
                     "vs_unused": {s: _paired(med[s], med["unused"]) for s in EXIT_STATES[1:]},
                     "vs_unmap_untagged": {s: _paired(med[s], med[UNMAP_STATES[0]]) for s in UNMAP_STATES[1:]},
                     "_med": med})
    ref = rows[0] if rows else None
    comparisons = [{"kernel": r["id"], "reference": ref["id"], "state": s, **_ratio(r["_med"][s], ref["_med"][s])}
                   for r in rows[1:] for s in STATES] if ref else []
    for r in rows:
        del r["_med"]
    return ExitBenchSummary(
        iterations=iterations, kernels=rows, comparisons=comparisons, boots=boots,
        ok=bool(boots) and all(b["ok"] for b in boots),
        failure=next((f"{b['kernel']} rep {b['rep']}: {b['failure']}" for b in boots if not b["ok"]), None))


def run(cfg: ExitBenchConfig) -> Filed[ExitBenchSummary]:
    """Boot each kernel `cfg.reps` times in alternating order and time fork+exit+wait in every registry state.
    Without `cfg.kernels`, `cfg.spec` is built (default: the debug mm_intent kernel)."""
    ids = list(dict.fromkeys(cfg.kernels))
    kernels = ([build.find(k) for k in ids] if ids
               else [build.ensure_built(cfg.spec or guest_command.DEFAULT_SPEC, say=say)])
    run = ResultStore().new_run("qemu-exit-bench", {"kernels": [k.id for k in kernels], "reps": cfg.reps,
                                                              "iterations": cfg.iterations})
    binary()
    by_id = {k.id: k for k in kernels}
    boots = [_one_boot(by_id[kid], r, cfg.iterations, cfg.timeout, run)
             for r, kid in stats.alternating_order([k.id for k in kernels], cfg.reps)]
    out = summarize(kernels, boots, cfg.iterations)
    run.write_summary(out.as_dict())
    return Filed(run, out)


def exit_status(summary: ExitBenchSummary) -> int:
    """0 when every boot was usable, else 1 (the summary's failure says why)."""
    return 0 if summary.ok else 1
