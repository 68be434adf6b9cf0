"""`kvds e2e`: arguments and input checks only (bad input exits 2, a missing mechanism 3, before anything changes);
the work is e2e/e2e_run.py."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import doctor, verbs
from harness.cli_args import positive_float, positive_int, require_root
from harness.errors import UserError
from harness.mapping import load_mapping
from harness.remote import add_target_args
from harness.paths import work_dir
from harness.units import parse_size
from kv_policy import options
from kv_policy.cli import trace_options
from kv_policy.importers import FORMATS, SHIPPED
from kv_policy.registry import parse_policies
from e2e import e2e_run, render
from e2e.tenants import Intensity

QUICK = {"steps": 150, "reps": 2}      # `kvds run`'s quick cell set (38 s measured on 2 cores)
FULL = {"steps": 2000, "reps": 5}


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", default="mooncake-slice",
                   help=f"serving trace (a file, or a shipped slice: {', '.join(SHIPPED)}; default mooncake-slice)")
    p.add_argument("--format", default="auto", choices=FORMATS, help="the trace's format (default: by content)")
    p.add_argument("--window", metavar="START:END", help="only requests arriving within these seconds of trace time")
    p.add_argument("--max-requests", type=positive_int, help="the first N requests (of the window)")
    p.add_argument("--time-scale", type=float, default=1.0, help="arrival times divided by this")
    p.add_argument("--step-ms", type=float, default=20.0, help="decode step length for request arrival times")
    p.add_argument("--steps", type=positive_int, help=f"decode steps of the slice (default {FULL['steps']}; "
                                                      f"--quick {QUICK['steps']})")
    p.add_argument("--reps", type=positive_int, help=f"repetitions per cell (default {FULL['reps']}; --quick "
                                                     f"{QUICK['reps']})")
    p.add_argument("--quick", action="store_true", help="the quick cell set `kvds run` leads with")
    p.add_argument("--block-kib", type=positive_int, default=16,
                   help="every KV block scaled to this many KiB (the trace's model has 448 KiB blocks; scaled so the "
                        "live set fits a shared host; default 16)")
    p.add_argument("--policy", default="ExpectedNextUse", help="kvds's policy (default ExpectedNextUse)")
    p.add_argument("--baseline", default="LRU", help="the reference policy (default LRU)")
    p.add_argument("--mapping", default="stack", help="the intent mapping (default stack: madvise per class, "
                                                      "ioprio classes, spill scheduler v2)")
    options.add_tier_args(p)
    p.set_defaults(fast_fraction=0.1)
    p.add_argument("--work-dir", type=Path, help=f"directory for the slow tier's backing file (default {work_dir()})")
    p.add_argument("--scheduler", default="mq-deadline", help="I/O scheduler of the loop device ('keep' leaves it)")
    p.add_argument("--spill-mbps", type=positive_float, default=40.0, help="the spill tenant's write cap (MB/s)")
    p.add_argument("--spill-kib", type=positive_int, default=1024, help="the spill tenant's write size (KiB)")
    p.add_argument("--spill-qd", type=positive_int, default=4, help="the spill tenant's writes in flight")
    p.add_argument("--spill-region", default="256M", help="the spill tenant's region (binary units: M = MiB)")
    p.add_argument("--hog-mib", type=positive_int, default=64, help="the memory hog's rewritten set (MiB)")
    p.add_argument("--hog-pause-ms", type=float, default=5.0, help="the hog's sleep between passes (ms)")
    p.add_argument("--squeeze", type=float, default=0.1,
                   help="each repetition's memory group holds the arena alone, limited this share of it below it "
                        "(default 0.1)")
    p.add_argument("--warmup", type=int, default=1,
                   help="unmeasured repetitions of the reference cell before the measured ones (default 1)")
    p.add_argument("--seed", type=int, default=0, help="the priority assignment's seed (a serving trace)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, the mapping's knobs and every command; "
                                                          "change nothing")
    add_target_args(p)  # --target guest / ssh://...: harness/remote runs this same command there
    p.set_defaults(guest_lab="io")  # --target guest boots the io lab kernel: 6.12 + mm_intent, loop, zram, throttling
    p.set_defaults(guest_seconds=guest_seconds)  # --target guest allows what the plan needs (harness/remote/guest.py)
    p.set_defaults(guest_warm=guest_warm)  # before a guest boot the host compiles the simulator (guest_numba.py)


def guest_warm(argv: list[str]) -> list[str]:
    """The host command that compiles what `kvds argv` in the guest will: the same command's dry run, which
    simulates the cells' plans (every numba function the run calls)."""
    return argv if "--dry-run" in argv else [*argv, "--dry-run"]


def guest_seconds(args: argparse.Namespace) -> float:
    """The guest time this command's plan needs, from its steps, repetitions and warm-up."""
    base = QUICK if args.quick else FULL
    return e2e_run.guest_seconds(args.steps or base["steps"], args.reps or base["reps"], max(args.warmup, 0))


def config(args: argparse.Namespace) -> e2e_run.E2eConfig:
    base = QUICK if args.quick else FULL
    fast, slow, cap, _ = options.tiers_from_args(args)
    trace = trace_options(args)
    assert trace is not None
    baseline, policy = parse_policies(args.baseline), parse_policies(args.policy)
    if len(baseline) != 1 or len(policy) != 1 or baseline == policy:
        raise UserError("--baseline and --policy must name one policy each, and two different ones")
    load_mapping(args.mapping)  # an unknown mapping fails here
    if not 0 <= args.squeeze < 1:
        raise UserError("--squeeze must be in [0, 1)")
    if args.hog_pause_ms < 0:
        raise UserError("--hog-pause-ms must not be negative")
    if args.warmup < 0:
        raise UserError("--warmup must not be negative")
    if args.work_dir is not None and not args.work_dir.is_dir():
        raise UserError(f"--work-dir {str(args.work_dir)!r} is not a directory")
    it = Intensity(args.spill_mbps, args.spill_kib, args.spill_qd, args.hog_mib, args.hog_pause_ms)
    cfg = e2e_run.E2eConfig(trace, args.steps or base["steps"], args.block_kib << 10, baseline[0], policy[0],
                            args.mapping, fast, slow, cap, args.reps or base["reps"], args.work_dir, args.scheduler,
                            it, parse_size(args.spill_region, "--spill-region"), args.squeeze, args.seed,
                            args.warmup)
    if not args.dry_run:
        require_root("kvds e2e")
        doctor.require("loop", "memcg", "swap.zram", "ioprio", "io.ioload")
    return cfg


VERB = verbs.Verb("e2e", "a serving-trace slice through the whole stack on this kernel: {LRU, kvds policy} x "
                  "{no intents, intent mapping}, with other tenants", _args, config, e2e_run.run, render.e2e,
                  e2e_run.E2eSummary, dry_run=e2e_run.dry_run, render_dry_run=render.e2e_dry_run)


def register(sub: argparse._SubParsersAction) -> None:
    verbs.add(sub, VERB)
