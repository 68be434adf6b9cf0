"""`kvds run`'s work: the suite's stages in order (each a real kvds command line, harness/suite.py runs it), then
the report. A stage whose mechanism this host lacks (by `kvds doctor`) is skipped with the doctor's reason; every
other stage that did not run is a failure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness import progress
from harness.commands.summary import RunSummary
from harness.report.build import build_report, verdict_lines
from harness.report.context import load_suites
from harness.results import Filed, ResultStore, Run
from harness.suite import Stage, StageOutcome, run_stage

IO_MODEL_QUICK = ("--reps", "3", "--duration", "2")  # with the boot, about 2 minutes on 2 shared cores
IO_NEEDS = ("root", "loop", "ioprio", "blk.schedulers", "io.ioload")  # what `kvds io` requires (io_priority/cli.py)


def stages(suite_dir: Path) -> list[Stage]:
    """The suite, in order. Quick sizes keep `make demo` within about 10 minutes on 2 cores."""
    trace = suite_dir / "replay-trace.npz"
    return [
        Stage("doctor", "probe this host's kernel mechanisms", ("doctor", "--json"), ("doctor", "--json"),
              files_run=False),
        # The thesis first: a real trace through the whole stack, {LRU, kvds policy} x {no intents, intents}; the
        # report's first table is its factorial table (the e2e section leads the report).
        Stage("e2e", "a serving-trace slice through the whole stack: policy x mechanism, with other tenants",
              ("e2e", "--quick", "--json"), ("e2e", "--json"),
              needs=("root", "loop", "memcg", "swap.zram", "io.ioload"), timeout_s=3600),
        Stage("io", "decode-critical reads under spill pressure on this host's disk, with eBPF block-layer histograms",
              ("io", "bench", "--duration", "3", "--reps", "2", "--ebpf", "--json"),
              ("io", "bench", "--duration", "8", "--reps", "5", "--ebpf", "--json"),
              needs=IO_NEEDS + ("ebpf.probe.blk",)),
        Stage("io-sweep", "scheduler x mapping sweep (Pareto plot)",
              ("io", "sweep", "--quick", "--json"), ("io", "sweep", "--json"), needs=IO_NEEDS),
        # The same reads on a device whose service time kvds sets (a sata-ssd null_blk model in the io guest lab, on
        # the instruction-count clock): a verdict this host's load stays out of, beside this host's disk's above.
        Stage("io-model", "decode-critical reads on a model device (sata-ssd) in the io guest lab, icount-warp clock",
              ("io", "bench", "--target", "guest", "--device-model", "sata-ssd", "--mapping", "spill-v2",
               *IO_MODEL_QUICK, "--json"),
              ("io", "bench", "--target", "guest", "--device-model", "sata-ssd", "--mapping", "spill-v2",
               "--reps", "6", "--duration", "6", "--json"),
              needs=("io.model-lab",), env=(("KVDS_GUEST_CLOCK", "icount-warp"),), timeout_s=3600),
        Stage("vm", "KV arena under memory pressure, baseline vs intent",
              ("vm", "bench", "--arena-mb", "128", "--reps", "2", "--json"),
              ("vm", "bench", "--arena-mb", "512", "--reps", "5", "--json"),
              needs=("root", "memcg", "pagemap", "swap.zram")),
        # Quick: every check on the edit-loop profile (1,000 + 1,000 lines, 5 s concurrent phase); the full job runs
        # the gate profile (10,000 + 10,000, 60 s), as `kvds qemu validate` does by default.
        Stage("qemu", "build (cached) and boot the mm_intent kernel, validate it",
              ("qemu", "validate", "--quick", "--json"), ("qemu", "validate", "--json"), needs=("qemu.guest",),
              timeout_s=3600),
        # A slice of a real serving trace shipped with the policy track (`--trace mooncake-slice`: the first Mooncake
        # conversation requests, kv_policy/data/README.md); priorities assigned by the track's seeded rule.
        Stage("policy", "policy simulator on a real serving-trace slice: every policy, MIN as the floor, 5 seeds",
              ("policy", "compare", "--trace", "mooncake-slice", "--max-requests", "40", "--seeds", "5",
               "--fast-fraction", "0.1", "--json"),
              ("policy", "compare", "--trace", "mooncake-slice", "--max-requests", "150", "--seeds", "5",
               "--fast-fraction", "0.1", "--json")),
        Stage("policy-sweep", "capacity sweep on the same slice: every policy and real-system row, MIN as the floor",
              ("policy", "sweep", "--trace", "mooncake-slice", "--max-requests", "40", "--seeds", "5",
               "--fractions", "0.05,0.1,0.25", "--policies", "all,engines", "--jobs", "2", "--json"),
              ("policy", "sweep", "--trace", "mooncake-slice", "--max-requests", "150", "--seeds", "5",
               "--fractions", "0.05,0.1,0.25", "--policies", "all,engines", "--json")),
        Stage("replay-trace", "generate the trace the replay executes",
              ("policy", "generate", "--profile", "deadline_pressure", "--seed", "1", "--set", "n_requests=24",
               "--set", "gen_tokens=32:128", "--set", "prompt_tokens=128:1024", "--out", str(trace), "--json"),
              ("policy", "generate", "--profile", "deadline_pressure", "--seed", "1", "--out", str(trace), "--json"),
              files_run=False),
        Stage("replay", "the policies' decisions executed on this kernel",
              ("policy", "replay", "--trace", str(trace), "--policy", "all", "--reps", "1", "--max-steps", "80",
               "--json"),
              ("policy", "replay", "--trace", str(trace), "--policy", "all", "--reps", "3", "--json"),
              needs=("root", "loop", "memcg")),
    ]


@dataclass(frozen=True)
class RunConfig:
    quick: bool = True  # small sizes (`make demo`); False: full sizes and more repetitions
    skip: frozenset[str] = frozenset()  # stage names (and "report") not to run


def run(cfg: RunConfig) -> Filed[RunSummary]:
    store = ResultStore()
    suite = store.new_run("suite", {"quick": cfg.quick, "skip": sorted(cfg.skip)})
    plan = stages(suite.path.resolve())
    outcomes: list[StageOutcome] = []
    t0 = time.monotonic()
    with progress.progress("kvds run", total=len(plan)) as bar:
        for i, st in enumerate(plan, 1):
            bar.update(description=f"[{i}/{len(plan)}] {st.name}: {st.title}")
            if st.name in cfg.skip:
                out = StageOutcome(st.name, "skipped", "skipped on request (--skip)")
            else:
                out = run_stage(st, cfg.quick, suite, store)
            outcomes.append(out)
            _record(suite, outcomes, time.monotonic() - t0)
            progress.say(f"{st.name:12s} {out.status:8s} {out.seconds:7.1f} s  {out.reason}")
            bar.advance()
    report_paths = {}
    if "report" not in cfg.skip:
        report_paths = build_report(load_suites([str(suite.path)], store), suite.path / "report")
    verdicts = verdict_lines(report_paths["json"]) if report_paths else []  # the report's own verdict lines
    summary = RunSummary(suite=suite.run_id, path=str(suite.path), seconds=time.monotonic() - t0,
                         stages=[o.as_dict() for o in outcomes], report={k: str(v) for k, v in report_paths.items()},
                         verdicts=verdicts)
    suite.write_summary(summary.as_dict())
    return Filed(suite, summary)


def _record(suite: Run, outcomes: list[StageOutcome], seconds: float) -> None:
    suite.write_json("stages", {"stages": [o.as_dict() for o in outcomes], "seconds": seconds})
