"""`kvds qemu reclaim-bench`: what mm_intent's reclaim consumer costs and what it protects, inside the guest kernel.

guest/reclaim_bench.c joins a memory cgroup with swap (zram), and per round faults an arena (4 MiB) back in and
asks memory.reclaim for twice that, timing the write and reading pgscan/pgsteal from memory.stat. After three
"warmup" rounds (not compared: a boot's first reclaim and first seconds are slower on every kernel), the states:
"off" (nothing registered since boot: the hooks are patched-out branches), then "empty" (the key on, this
process without intents) and "on" (1,024 latency-critical ranges on a mapping reclaim never sees, so every
arena folio is looked up and none matches: the decisions are those of "off", the difference is the lookups'
cost) alternating round by round, then "critical" (half the arena registered latency-critical: the effect).

One boot is one repetition; each state's figure is the mean over boots of the per-boot median time per round,
with a t interval over boots (harness.stats.mean_ci); "on" and "empty" are compared with "off" and with each
other by the ratio of those means and its interval (harness.stats.rep_mean_ratio), and by the mean of the
per-boot ratios with its interval over boots (a TCG guest's clock rate can differ from boot to boot; within one
boot it is the same for every state), both read by the project's one rule (higher or lower only when the whole
interval says so). A boot whose guest clock outran the host's is refused, as in exit-bench. Several kernels (for
instance one without the series) boot in alternating order, the first being the reference. Kernels cannot share a
boot, so each round also times a fixed user-space loop around its memory.reclaim (ref_ns): the guest's speed and
clock rate move the loop as they move reclaim, and ns/ref_ns ("normalised") compares kernels boot against boot.
A kernel is compared with the reference state by state three ways: the ratio of means (each side resampled by
boot), and boot paired with boot (the same repetition, adjacent in the alternating order: geometric mean of the
pairs' ratios, t interval on their logs), raw and normalised. Verdicts: ranges cost at most 5% over no intents
(on/empty within each boot), and an unused feature's "off" within 5% of the reference kernel's (paired).
The debug kernel measures KASAN and lockdep as much as reclaim: compare states within a kernel, or use
`--config base`.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.errors import UserError
from harness.progress import say
from harness.results import Filed, ResultStore, Run, StoredSummary
from qemu_validation import validate_timeline
from qemu_validation.boot import guest_command, guest_programs
from qemu_validation.kernel import build
from qemu_validation.exit_bench_run import boot_outputs, difference, paired_ratio, record_boot_argv

SOURCE = Path(__file__).resolve().parent / "guest" / "reclaim_bench.c"
GUEST_PATH = "bin/reclaim_bench"
STATES = ("off", "empty", "on", "critical")
COST_PAIRS = (("on", "off"), ("empty", "off"), ("on", "empty"))   # (state, reference)
RANGES_PAIR = "on/empty"                                          # the goal's pair: ranges vs no intents
TOLERANCE = 0.05                                                  # the "within 5%"
MAX_RANGES = 1024                                                 # reclaim_bench.c: ranges registered in "on"
_ROUND = re.compile(r"^reclaim_bench (\w+) round=(\d+) ns=(\d+) pgscan=(\d+) pgsteal=(\d+) swapped=(\d+) "
                    r"swapped_critical=(\d+) present_critical=(\d+)(?: ref_ns=(\d+))?$", re.M)
_HEAD = re.compile(r"^reclaim_bench feature=(\d) arena_pages=(\d+) rounds=(\d+)$", re.M)
_RANGES = re.compile(r"^reclaim_bench ranges=(\d+)$", re.M)
_ERROR = re.compile(r"^reclaim_bench error (.*)$", re.M)


@dataclass(frozen=True)
class ReclaimBenchConfig:
    """What `kvds qemu reclaim-bench` was asked: the builds to boot (none: `spec` is built), how much per boot."""
    kernels: tuple[str, ...] = ()
    spec: build.BuildSpec | None = None      # None: the debug mm_intent kernel (guest_command.DEFAULT_SPEC)
    rounds: int = 5                           # memory.reclaim rounds per state per boot
    arena_mb: int = 4                         # anonymous memory reclaimed per round
    reps: int = 3                             # boots per kernel, in alternating order
    timeout: float = 1200.0                   # seconds before a hung guest is killed

    def __post_init__(self) -> None:
        """Bad counts are the user's error, refused where the config is made (before anything boots)."""
        if self.rounds < 3:
            raise UserError("--rounds must be at least 3 (a median of fewer rounds says nothing)")
        if not 4 <= self.arena_mb <= 256:
            raise UserError("--arena-mb must be between 4 and 256 (the guest has 1 GiB and a 512 MiB zram swap)")
        if self.reps < 1:
            raise UserError("--reps must be at least 1")


@dataclass(frozen=True)
class ReclaimBenchSummary(StoredSummary):
    """summary.json of a `qemu-reclaim-bench` run (and `kvds qemu reclaim-bench --json`'s summary)."""
    rounds: int                        # memory.reclaim rounds per state per boot
    arena_mb: int                      # MiB of anonymous memory faulted back in and reclaimed per round
    kernels: list[dict[str, Any]]      # per kernel and state: ms per round (mean of per-boot medians), cost ratios
    comparisons: list[dict[str, Any]]  # each later kernel / the first, per state: ratio of means, paired by rep
    verdicts: dict[str, dict[str, Any]]  # the 5% goals by the one rule: met, missed or inconclusive
    boots: list[dict[str, Any]]        # every boot, in the order it ran, with its rounds and figures
    ok: bool                           # every boot usable
    failure: str | None                # the first unusable boot's reason when not ok


def binary() -> Path:
    return guest_programs.static_binary(SOURCE)


def parse(text: str) -> dict:
    """The guest's lines: per state, its rounds in order; the header; the ranges held in "on"; an error line."""
    rounds: dict[str, list[dict]] = {}
    for m in _ROUND.finditer(text):
        ns, scan, steal, swapped, cswapped, cpresent = map(int, m.groups()[2:8])
        rounds.setdefault(m.group(1), []).append({"ns": ns, "pgscan": scan, "pgsteal": steal, "swapped": swapped,
                                                  "swapped_critical": cswapped, "present_critical": cpresent,
                                                  "ref_ns": int(m.group(9)) if m.group(9) else None})
    head, ranges, err = _HEAD.search(text), _RANGES.search(text), _ERROR.search(text)
    return {"rounds": rounds, "feature": bool(head and head.group(1) == "1"),
            "arena_pages": int(head.group(2)) if head else None, "ranges": int(ranges.group(1)) if ranges else None,
            "error": err.group(1) if err else None}


def boot_ok(parsed: dict, rounds: int, status: int | None, guest_uptime: float | None = None,
            host_seconds: float | None = None) -> str | None:
    """Why one boot's figures cannot be used (None when they can)."""
    if guest_uptime is not None and host_seconds and guest_uptime > host_seconds * validate_timeline.CLOCK_TOLERANCE:
        return (f"the guest's clock ran {guest_uptime / host_seconds:.2f}x the host's ({guest_uptime:.1f} s of uptime "
                f"in {host_seconds:.1f} s): its TSC was miscalibrated, its timings are wrong")
    if parsed["error"]:
        return parsed["error"]
    want = STATES if parsed["feature"] else STATES[:3]
    short = [s for s in want if len(parsed["rounds"].get(s, [])) != rounds]
    if short:
        return f"states without their {rounds} rounds: {', '.join(short)} (exit status {status})"
    if parsed["feature"] and (status != 0 or parsed["ranges"] != MAX_RANGES):
        return f"held {parsed['ranges']} ranges of {MAX_RANGES} (exit status {status})"
    if not parsed["feature"] and status not in (0, 1):
        return f"exit status {status}"
    return None


def boot_figures(parsed: dict) -> dict:
    """Per state: median ns per round, median of ns / ref_ns per round (None from a program without the
    reference loop), pages scanned and stolen per round (medians), ns per stolen page, and for
    "critical" the worst round's critical pages swapped out and the fewest of the other half swapped."""
    out = {}
    for s, rs in parsed["rounds"].items():
        steal = sum(r["pgsteal"] for r in rs)
        refs = [r.get("ref_ns") for r in rs]
        norm = statistics.median(r["ns"] / x for r, x in zip(rs, refs)) if all(refs) else None
        out[s] = {"rounds": len(rs), "median_ms": statistics.median(r["ns"] for r in rs) / 1e6,
                  "median_norm": norm,
                  "median_pgscan": statistics.median(r["pgscan"] for r in rs),
                  "median_pgsteal": statistics.median(r["pgsteal"] for r in rs),
                  "ns_per_stolen_page": sum(r["ns"] for r in rs) / steal if steal else None,
                  "max_swapped_critical": max(r["swapped_critical"] for r in rs),
                  "min_swapped_other": min(r["swapped"] for r in rs)}
    return out


def bench_argv(rounds: int, arena_mb: int) -> list[str]:
    return ["sh", "-c", f"/{GUEST_PATH} {rounds} {arena_mb} > /share/out.txt 2>&1; echo $? > /share/status.txt; "
                        "read up _ < /proc/uptime; echo $up > /share/uptime.txt"]


def _one_boot(kb: build.KernelBuild, rep: int, rounds: int, arena_mb: int, timeout: float, run: Run) -> dict:
    share = run.path / "guest" / f"{kb.id[:12]}-rep{rep + 1}"
    share.mkdir(parents=True)
    say(f"rep {rep + 1}: {kb.label} ({kb.id}), {rounds} rounds per state of memory.reclaim on {arena_mb} MiB")
    res = guest_command.boot_and_run(kb.id, bench_argv(rounds, arena_mb), share, timeout=timeout,
                                     files={GUEST_PATH: binary()}, log_dir=share)
    record_boot_argv(run, kb.id, rep, res.qemu_argv)
    (share / "initramfs.cpio").unlink(missing_ok=True)
    read, status, uptime = boot_outputs(share)
    parsed = parse(read("out.txt"))
    why = res.failure or boot_ok(parsed, rounds, status, uptime, res.seconds)
    return {"rep": rep + 1, "kernel": kb.id, "mm_intent": parsed["feature"], "status": status, "ok": why is None,
            "failure": why, "seconds": round(res.seconds, 1), "guest_uptime": uptime, "figures": boot_figures(parsed),
            **parsed}


def _ratio(a: list[float], b: list[float]) -> dict:
    est = stats.rep_mean_ratio(a, b)
    return {**est.as_dict(), "text": str(est), "difference": difference(est)}


def within_boot_ratio(a: list[float], b: list[float]) -> dict:
    """The mean over boots of a/b taken within each boot, with its t interval over boots: immune to a guest clock
    whose rate differs between boots."""
    est = stats.mean_ci([x / y for x, y in zip(a, b)], floor=0.0)
    return {**est.as_dict(), "text": str(est), "difference": difference(est)}


def paired_by_rep(a: dict[int, float], b: dict[int, float]) -> dict:
    """Two kernels' figures keyed by repetition, paired where both boots of a repetition succeeded: the geometric
    mean of a/b over those pairs with its t interval on the logs (paired_ratio), how many pairs were higher."""
    reps = sorted(set(a) & set(b))
    xa, xb = [a[r] for r in reps], [b[r] for r in reps]
    est = paired_ratio(xa, xb)
    return {**est.as_dict(), "text": str(est), "difference": difference(est), "pairs": len(reps),
            "pairs_higher": sum(1 for x, y in zip(xa, xb) if x > y)}


def _by_rep(boots: list[dict], state: str, key: str) -> dict[int, float]:
    return {b["rep"]: b["figures"][state][key] for b in boots
            if state in b["figures"] and b["figures"][state].get(key)}


def _verdict(est: dict, judge, *args) -> dict:
    e = stats.Estimate(est["value"], est["lo"], est["hi"], est.get("conf", 0.95), est.get("reason", ""))
    v = judge(e, *args)
    return {**v.as_dict(), "text": str(v)}


def compare_kernels(ref_boots: list[dict], boots: list[dict], state: str) -> dict:
    """One kernel against the reference in one state: ratio of means, paired raw, paired normalised."""
    a, b = _by_rep(boots, state, "median_ms"), _by_rep(ref_boots, state, "median_ms")
    out = {"state": state, **_ratio(list(a.values()), list(b.values())), "paired": paired_by_rep(a, b)}
    na, nb = _by_rep(boots, state, "median_norm"), _by_rep(ref_boots, state, "median_norm")
    out["paired_norm"] = paired_by_rep(na, nb) if na and nb else None
    return out


def verdicts(rows: list[dict], comparisons: list[dict]) -> dict:
    """The issue's two reclaim-cost goals read by the one rule: ranges cost at most 5% over no intents (within
    each boot, raw and normalised), and a kernel's unused feature ("off") within 5% of the reference kernel's
    (paired by repetition, raw and normalised). Only what the data holds is judged: the ranges goal only on a
    kernel with mm_intent."""
    out: dict[str, dict] = {}
    for r in (r for r in rows if r["mm_intent"]):      # without the series "on" holds no ranges
        for kind in ("cost_within_boot", "cost_within_boot_norm"):
            est = r.get(kind, {}).get(RANGES_PAIR)
            if est:
                out[f"{r['id']} {RANGES_PAIR} {kind}"] = _verdict(est, stats.judge_at_most, 1 + TOLERANCE,
                                                                    f"{RANGES_PAIR} ")
    for c in comparisons:
        if c["state"] != "off":
            continue
        for kind in ("paired", "paired_norm"):
            if c.get(kind):
                out[f"{c['kernel']}/{c['reference']} off {kind}"] = _verdict(c[kind], stats.judge_within, 1.0,
                                                                           TOLERANCE, "off/off ")
    return out


def summarize(kernels: list[build.KernelBuild], boots: list[dict], rounds: int,
              arena_mb: int) -> ReclaimBenchSummary:
    rows = []
    for kb in kernels:
        mine = [b for b in boots if b["kernel"] == kb.id and b["ok"]]
        states = [s for s in STATES if mine and all(s in b["figures"] for b in mine)]
        med = {s: [b["figures"][s]["median_ms"] for b in mine] for s in states}
        norm = {s: [b["figures"][s].get("median_norm") for b in mine] for s in states}
        norm = {s: v for s, v in norm.items() if v and all(v)}
        rows.append({
            "id": kb.id, "label": kb.label, "debug": kb.kasan, "release": kb.info.get("kernel_release"),
            "mm_intent": any(b["mm_intent"] for b in mine), "boots": len(mine),
            "median_ms": {s: {**stats.mean_ci(v, floor=0.0).as_dict(), "per_boot": v,
                              "text": str(stats.mean_ci(v, floor=0.0))} for s, v in med.items()},
            "per_boot": {s: [b["figures"][s] for b in mine] for s in states},
            "cost": {f"{a}/{b}": _ratio(med[a], med[b]) for a, b in COST_PAIRS if a in med and b in med},
            "cost_within_boot": {f"{a}/{b}": within_boot_ratio(med[a], med[b])
                                 for a, b in COST_PAIRS if a in med and b in med},
            "cost_within_boot_norm": {f"{a}/{b}": within_boot_ratio(norm[a], norm[b])
                                      for a, b in COST_PAIRS if a in norm and b in norm},
            "median_norm": {s: {**stats.mean_ci(v, floor=0.0).as_dict(), "text": str(stats.mean_ci(v, floor=0.0))}
                            for s, v in norm.items()},
            "_boots": mine})
    ref = rows[0] if rows else None
    comparisons = [{"kernel": r["id"], "reference": ref["id"], **compare_kernels(ref["_boots"], r["_boots"], s)}
                   for r in rows[1:] for s in STATES[:3]
                   if s in r["median_ms"] and s in ref["median_ms"]] if ref else []
    for r in rows:
        del r["_boots"]
    return ReclaimBenchSummary(
        rounds=rounds, arena_mb=arena_mb, kernels=rows, comparisons=comparisons,
        verdicts=verdicts(rows, comparisons), boots=boots, ok=bool(boots) and all(b["ok"] for b in boots),
        failure=next((f"{b['kernel']} rep {b['rep']}: {b['failure']}" for b in boots if not b["ok"]), None))


def run(cfg: ReclaimBenchConfig) -> Filed[ReclaimBenchSummary]:
    """Boot each kernel `cfg.reps` times in alternating order and time memory.reclaim in every registry state.
    Without `cfg.kernels`, `cfg.spec` is built (default: the debug mm_intent kernel)."""
    ids = list(dict.fromkeys(cfg.kernels))
    kernels = ([build.find(k) for k in ids] if ids
               else [build.ensure_built(cfg.spec or guest_command.DEFAULT_SPEC, say=say)])
    run = ResultStore().new_run("qemu-reclaim-bench", {"kernels": [k.id for k in kernels],
                                                                 "reps": cfg.reps, "rounds": cfg.rounds,
                                                                 "arena_mb": cfg.arena_mb})
    binary()
    by_id = {k.id: k for k in kernels}
    boots = [_one_boot(by_id[kid], r, cfg.rounds, cfg.arena_mb, cfg.timeout, run)
             for r, kid in stats.alternating_order([k.id for k in kernels], cfg.reps)]
    out = summarize(kernels, boots, cfg.rounds, cfg.arena_mb)
    run.write_summary(out.as_dict())
    return Filed(run, out)


def exit_status(summary: ReclaimBenchSummary) -> int:
    """0 when every boot was usable, else 1 (the summary's failure says why)."""
    return 0 if summary.ok else 1
