"""`kvds run`: the main job. Doctor, the I/O bench (with eBPF histograms), the VM bench, the QEMU validate,
the policy comparison and its real-kernel replay, then the report — each stage a real kvds command.

A stage whose mechanism this host lacks (by `kvds doctor`) is skipped with the doctor's reason; every other stage
that did not run is a failure (harness/suite.py says which), and the suite then exits 1. Skipped and failed
stages are listed with their reasons at the end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness import progress
from harness.cli_args import add_json_flag, require_root
from harness.emit import emit
from harness.errors import UserError
from harness.report.build import build_report, verdict_lines
from harness.report.context import load_suites
from harness.results import ResultStore, Run
from harness.suite import Stage, StageOutcome, run_stage

IO_NEEDS = ("root", "loop", "ioprio", "blk.schedulers", "io.ioload")  # what `kvds io` requires (io_priority/cli.py)


def stages(suite_dir: Path) -> list[Stage]:
    """The suite, in order. Quick sizes keep `make demo` within about 10 minutes on 2 cores."""
    trace = suite_dir / "replay-trace.npz"
    return [
        Stage("doctor", "probe this host's kernel mechanisms", ("doctor", "--json"), ("doctor", "--json"),
              files_run=False),
        Stage("io", "decode-critical reads under spill pressure, with eBPF block-layer histograms",
              ("io", "bench", "--duration", "3", "--reps", "2", "--ebpf", "--json"),
              ("io", "bench", "--duration", "8", "--reps", "5", "--ebpf", "--json"),
              needs=IO_NEEDS + ("ebpf.probe.blk",)),
        Stage("io-sweep", "scheduler x mapping sweep (Pareto plot)",
              ("io", "sweep", "--quick", "--json"), ("io", "sweep", "--json"), needs=IO_NEEDS),
        Stage("vm", "KV arena under memory pressure, baseline vs intent",
              ("vm", "bench", "--arena-mb", "128", "--reps", "2", "--json"),
              ("vm", "bench", "--arena-mb", "512", "--reps", "5", "--json"),
              needs=("root", "memcg", "pagemap", "swap.zram")),
        Stage("qemu", "build (cached) and boot the mm_intent kernel, validate it",
              ("qemu", "validate", "--json"), ("qemu", "validate", "--json"), needs=("qemu.guest",),
              timeout_s=3600),
        # A slice of a real serving trace shipped with the policy track (`--trace mooncake-slice`: the first Mooncake
        # conversation requests, kv_policy/data/README.md); priorities assigned by the track's seeded rule.
        Stage("policy", "policy simulator on a real serving-trace slice: every policy, MIN as the floor, 5 seeds",
              ("policy", "compare", "--trace", "mooncake-slice", "--max-requests", "40", "--seeds", "5",
               "--fast-fraction", "0.1", "--json"),
              ("policy", "compare", "--trace", "mooncake-slice", "--max-requests", "150", "--seeds", "5",
               "--fast-fraction", "0.1", "--json")),
        Stage("policy-sweep", "capacity sweep on the same slice: every policy, MIN as the floor",
              ("policy", "sweep", "--trace", "mooncake-slice", "--max-requests", "40", "--seeds", "5",
               "--fractions", "0.05,0.1,0.25", "--json"),
              ("policy", "sweep", "--trace", "mooncake-slice", "--max-requests", "150", "--seeds", "5",
               "--fractions", "0.05,0.1,0.25", "--json")),
        Stage("replay-trace", "generate the trace the replay executes",
              ("policy", "generate", "--profile", "deadline_pressure", "--seed", "1", "--set", "n_requests=24",
               "--set", "gen_tokens=32:128", "--set", "prompt_tokens=128:1024", "--out", str(trace), "--json"),
              ("policy", "generate", "--profile", "deadline_pressure", "--seed", "1", "--out", str(trace), "--json"),
              files_run=False),
        Stage("replay", "the policies' decisions executed on this kernel",
              ("policy", "replay", "--trace", str(trace), "--policy", "all", "--reps", "1", "--max-steps", "80", "--json"),
              ("policy", "replay", "--trace", str(trace), "--policy", "all", "--reps", "3", "--json"),
              needs=("root", "loop", "memcg")),
    ]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="the main job: every track on this host, then the report")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (the default; `make demo`)")
    size.add_argument("--full", action="store_true", help="full sizes and more repetitions")
    p.add_argument("--skip", action="append", default=[], metavar="STAGE",
                   help="skip a stage (repeatable; comma lists allowed)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _skips(args: argparse.Namespace, names: list[str]) -> set[str]:
    out: set[str] = set()
    for item in args.skip:
        for name in filter(None, (x.strip() for x in item.split(","))):
            if name not in names and name != "report":
                raise UserError(f"unknown stage {name!r} for --skip (stages: {', '.join(names)}, report)")
            out.add(name)
    return out


def run(args: argparse.Namespace) -> int:
    require_root("kvds run")
    quick = not args.full
    store = ResultStore()
    probe = stages(Path("."))
    skip = _skips(args, [s.name for s in probe])
    suite = store.new_run("suite", {"quick": quick, "skip": sorted(skip)})
    plan = stages(suite.path.resolve())
    outcomes: list[StageOutcome] = []
    t0 = time.monotonic()
    with progress.progress("kvds run", total=len(plan)) as bar:
        for i, st in enumerate(plan, 1):
            bar.update(description=f"[{i}/{len(plan)}] {st.name}: {st.title}")
            if st.name in skip:
                out = StageOutcome(st.name, "skipped", "skipped on request (--skip)")
            else:
                out = run_stage(st, quick, suite, store)
            outcomes.append(out)
            _record(suite, outcomes, time.monotonic() - t0)
            progress.say(f"{st.name:12s} {out.status:8s} {out.seconds:7.1f} s  {out.reason}")
            bar.advance()
    report_paths = {}
    if "report" not in skip:
        report_paths = build_report(load_suites([str(suite.path)], store), suite.path / "report")
    failed = [o for o in outcomes if o.status == "failed"]
    verdicts = verdict_lines(report_paths["json"]) if report_paths else []  # the report's own verdict lines
    doc = {"suite": suite.run_id, "path": str(suite.path), "seconds": time.monotonic() - t0,
           "stages": [o.as_dict() for o in outcomes], "report": {k: str(v) for k, v in report_paths.items()},
           "verdicts": verdicts}
    suite.write_summary(doc)
    if args.json:
        emit(suite, doc, True)
    else:
        n_ok = sum(o.status == "ok" for o in outcomes)
        skipped = [o for o in outcomes if o.status == "skipped"]
        print(f"suite {suite.run_id}: {n_ok} ok, {len(skipped)} skipped, {len(failed)} failed of {len(outcomes)} "
              f"stages, {time.monotonic() - t0:.0f} s")
        for o in skipped + failed:
            print(f"  {o.status} {o.name}: {o.reason}")
        for line in verdicts:
            print(f"  verdict: {line}")
        if report_paths:
            print(f"report: {report_paths['markdown']}")
    return 1 if failed else 0


def _record(suite: Run, outcomes: list[StageOutcome], seconds: float) -> None:
    suite.write_json("stages", {"stages": [o.as_dict() for o in outcomes], "seconds": seconds})
