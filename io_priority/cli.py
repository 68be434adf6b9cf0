"""`kvds io bench|sweep|fio-check|repro`: decode-critical KV reads under spill pressure. One harness.verbs.Verb
per command: its config function here parses the arguments and checks input and host before anything changes; the
verb's run module (bench_run, sweep_run, fio_check_run, repro_run) does the work; render.py prints the typed
summary, harness/emit.py with --json."""

from __future__ import annotations

import argparse
import os

from harness import doctor
from harness.cli_args import nonneg_float, nonneg_int, positive_float, positive_int, require_root
from harness.errors import UserError
from harness.mapping import available_mappings
from harness.remote import add_target_args
from harness.verbs import Verb, add
from io_priority import bench_run, blocktrace, device_model, fio_check_run, render, repro_run, sweep_run
from io_priority.auto_grow import Grow
from io_priority.device import MODEL_PREFIX, CONSENT_FLAG, Layout, MiB, device_spec, scratch_dir
from io_priority.summary import BenchSummary, FioCheckSummary, ReproSummary, SweepSummary
from io_priority.sweep_run import (DEFAULT_DURATION_S, DEFAULT_MAPPINGS, DEFAULT_PLAN, DEFAULT_REPS, DEFAULT_SCHEDULERS,
                                   DEFAULT_TIME_CAP_S, DEFAULT_UNTIL_WIDTH, QUICK_MAPPINGS)
from io_priority.workload import ENGINES, SPILL_KINDS, WAITS, Workload

SCHEDULERS = ("mq-deadline", "bfq", "kyber", "none")
KV_MIB, SPILL_MIB = 256, 512
# --quick (the main job's `kvds run --quick`): a smaller scratch file to lay down, shorter repetitions
QUICK_KV_MIB, QUICK_SPILL_MIB, QUICK_DURATION_S = 64, 256, 1.0
MODES = ("unloaded", "baseline", "separated")


def _mode_list(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)} (comma-separated), not {text!r}")
    return list(dict.fromkeys(modes))


def _percent_1_100(text: str) -> int:
    v = nonneg_int(text)
    if not 1 <= v <= 100:
        raise argparse.ArgumentTypeError(f"{text!r} must be a percentage from 1 to 100")
    return v


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(k < 3 for k in sizes):
        raise argparse.ArgumentTypeError(f"repetition counts are comma-separated integers >= 3, not {text!r}")
    return sizes


def _device_model(text: str) -> str:
    if text not in device_model.MODELS:
        raise argparse.ArgumentTypeError(f"unknown device model {text!r} (known: {', '.join(device_model.MODELS)})")
    return text


def _common(p: argparse.ArgumentParser) -> None:
    add_target_args(p)  # --target/--hosts: harness/remote runs this same command on those hosts
    p.add_argument("--engine", choices=ENGINES, default="psync", help="how I/O is submitted (default psync)")
    p.add_argument("--device", default="loop",
                   help="'loop' (default: a kvds loop device over a scratch file in --work-dir), an existing regular "
                        "file, or a free block device; a path that does not exist is refused")
    p.add_argument("--device-model", default=None, metavar="NAME", type=_device_model,
                   help="a null_blk device whose service time kvds sets, from a named model "
                        f"({', '.join(device_model.MODELS)}; io_priority/device_model.py says where each model's "
                        "numbers come from); with --target guest, in the io lab kernel (instead of --device)")
    p.set_defaults(guest_lab="io")  # --target guest boots the io lab kernel (null_blk, bfq, kyber)
    p.add_argument("--work-dir", default=None,
                   help="existing directory for kvds's scratch files (the loop device's backing file; default "
                        "$KVDS_WORK_DIR or /var/tmp/kvds)")
    p.add_argument(CONSENT_FLAG, dest="destroy_data", action="store_true",
                   help="allow overwriting a file or a device that holds a filesystem signature")
    p.add_argument("--duration", type=positive_float, default=5.0, help="seconds per repetition (default 5)")
    p.add_argument("--reps", type=positive_int, default=3, help="repetitions per variant, alternating (default 3)")
    p.add_argument("--rate", type=nonneg_float, default=200.0,
                   help="critical reads per second, one per decode step, open loop (0 = closed loop at QD1; "
                        "default 200)")
    p.add_argument("--wait", choices=WAITS, default="sleep",
                   help="how the reader waits for each read's due time and (io_uring) its completion: sleep "
                        "(clock_nanosleep and a blocking io_uring_enter, like fio's rate limiting; default) or spin "
                        "(busy clock and a polled completion queue, like a busy serving thread)")
    p.add_argument("--read-kib", type=positive_int, default=16, help="critical read size in KiB (default 16)")
    p.add_argument("--spill-kib", type=positive_int, default=1024, help="spill write size in KiB (default 1024)")
    p.add_argument("--spill-qd", type=positive_int, default=8, help="spill writes in flight (default 8)")
    p.add_argument("--spill", choices=SPILL_KINDS, default="direct",
                   help="spill writes O_DIRECT (default) or buffered with an fsync every 64 MiB")
    p.add_argument("--fsync-every-mib", type=nonneg_int, default=64,
                   help="--spill buffered: fsync after this many MiB (0: only the final fsync; default 64)")
    p.add_argument("--dirty-background-ratio", type=_percent_1_100, default=None,
                   help="--spill buffered: set vm.dirty_background_ratio for the run (journaled, host-wide; "
                        "restored on exit), so the flusher, not the writer's fsync, writes the spill back")
    p.add_argument("--kv-mib", type=positive_int, default=None,
                   help=f"KV region read by critical reads (MiB; default {KV_MIB}, {QUICK_KV_MIB} with --quick)")
    p.add_argument("--spill-mib", type=positive_int, default=None,
                   help=f"spill region written (MiB; default {SPILL_MIB}, {QUICK_SPILL_MIB} with --quick)")
    p.add_argument("--guard-us", type=positive_int, default=100, help="the slack pacer's safety margin (us)")
    p.add_argument("--budget-devs", type=nonneg_float, default=2.0,
                   help="the slack pacer budgets each write at mean + this many mean deviations (default 2)")
    p.add_argument("--stall-ms", type=positive_float, default=50.0,
                   help="a read slower than this (service time) during which no spill write completed is a stall: "
                        "counted and reported apart, with the stall-free figures beside the all-reads ones "
                        "(default 50)")
    p.add_argument("--no-trace", dest="trace", action="store_false",
                   help="do not record block-layer priorities (block:block_rq_issue)")
    p.add_argument("--verbose", action="store_true",
                   help="print each helper command (ioload, fio) on stderr as it starts (meta.json keeps them all)")


def _check_mapping(name: str) -> None:
    if name not in available_mappings() and not name.endswith(".toml"):
        raise UserError(f"unknown mapping {name!r} (available: {', '.join(available_mappings())})")


def _bench_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("--mode", type=_mode_list, default=list(MODES),
                   help="comma-separated modes (default unloaded,baseline,separated)")
    b.add_argument("--mapping", default="ioprio-only", help="mapping for 'separated' (default ioprio-only)")
    b.add_argument("--scheduler", choices=SCHEDULERS, default="mq-deadline", help="I/O scheduler (default mq-deadline)")
    b.add_argument("--dry-run", action="store_true",
                   help="print the device, the order and every ioload command a bench would start, and change "
                        "nothing (no device set up, nothing started)")
    b.add_argument("--ebpf", action="store_true",
                   help="also record the eBPF track's per-class block-layer histograms (one session per repetition)")
    _common(b)


def bench_config(args: argparse.Namespace) -> bench_run.BenchConfig:
    """A dry run checks the input only (its device is checked read-only by the plan); a run also the host."""
    args.device = device_of(args)
    _check_mapping(args.mapping)
    if not args.dry_run:
        _require(args, [args.mapping])
    trace, note = block_trace(args.trace) if not args.dry_run else (args.trace, "a dry run records nothing")
    return bench_run.BenchConfig(workload_from(args), layout_from(args), tuple(args.mode), args.mapping,
                                 args.scheduler, args.device, args.destroy_data, args.reps, trace, args.ebpf,
                                 args.stall_ms, args.verbose, note)


def _sweep_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--quick", action="store_true",
                   help=f"{QUICK_DURATION_S:g} s x 2 repetitions, mq-deadline and bfq only, mappings "
                        f"{', '.join(QUICK_MAPPINGS)}, {QUICK_KV_MIB}+{QUICK_SPILL_MIB} MiB device (about a minute)")
    s.add_argument("--schedulers", nargs="+", choices=SCHEDULERS, default=None,
                   help="schedulers, each with every mapping named (default: the default plan, "
                        + "; ".join(f"{s}: {' '.join(ms)}" for s, ms in DEFAULT_PLAN.items())
                        + f"; with --mappings alone: {' '.join(DEFAULT_SCHEDULERS)})")
    s.add_argument("--mappings", nargs="+", default=None,
                   help="mappings applied as 'separated' variants under every scheduler (default: the default plan; "
                        f"with --schedulers alone: {' '.join(DEFAULT_MAPPINGS)})")
    s.add_argument("--until-width", type=nonneg_float, default=DEFAULT_UNTIL_WIDTH,
                   help="auto-grow: add 2 repetitions per round to each point whose judged interference is "
                        "inconclusive with an interval wider than this (hi/lo), alternating with its unloaded "
                        f"reference, until none is left or --time-cap passes (default {DEFAULT_UNTIL_WIDTH:g}; "
                        "0 = off)")
    s.add_argument("--time-cap", type=positive_float, default=DEFAULT_TIME_CAP_S,
                   help=f"auto-grow stops before a round that would end after this many seconds "
                        f"(default {DEFAULT_TIME_CAP_S:g})")
    _common(s)
    s.set_defaults(reps=DEFAULT_REPS, duration=DEFAULT_DURATION_S)


def sweep_config(args: argparse.Namespace) -> sweep_run.SweepConfig:
    args.device = device_of(args)
    plan = sweep_plan(args.schedulers, args.mappings, args.quick)
    if args.quick:
        args.duration, args.reps = min(args.duration, QUICK_DURATION_S), min(args.reps, 2)
    grow = None if args.quick or not args.until_width else Grow(args.until_width, args.time_cap)
    _require(args, sorted({m for ms in plan.values() for m in ms}))
    trace, note = block_trace(args.trace)
    return sweep_run.SweepConfig(workload_from(args), layout_from(args), plan, args.device, args.destroy_data,
                                 args.reps, trace, grow, args.stall_ms, args.verbose, note)


def block_trace(asked: bool) -> tuple[bool, str]:
    """Whether the run records the block layer, and why not: the verdicts do not rest on it (it shows the classes
    requests carried and where a stall's time went), so a kernel without tracefs runs without it and says so."""
    if not asked:
        return False, "not recorded (--no-trace)"
    missing = blocktrace.tracefs_missing()
    return (False, f"not recorded: {missing}") if missing else (True, "recorded (block:block_rq_issue/complete)")


def _repro_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("runs", nargs="+", help="io-sweep run ids, unique id prefixes or paths (in the order run)")
    r.add_argument("--predict", type=_sizes, default=None,
                   help="comma-separated repetition counts: predicted chance that 3 sweeps of that size (grown by "
                        "--until-width / --time-cap) give each point the same verdict, from the runs' repetitions")
    r.add_argument("--default-plan", action="store_true",
                   help="predict for the default sweep's points (sweep_run.DEFAULT_PLAN) instead of the runs' points")
    r.add_argument("--rule", choices=("stored", "paired", "unpaired"), default="stored",
                   help="stored: each run's verdicts as it judged them; paired / unpaired: re-judged from the runs' "
                        "samples with the interference resampled by the repetitions that ran side by side with the "
                        "reference, or independently. --predict simulates the paired rule (what a sweep applies) "
                        "unless unpaired")
    r.add_argument("--sims", type=positive_int, default=1000, help="simulated groups of 3 sweeps (default 1000)")
    r.add_argument("--until-width", type=nonneg_float, default=DEFAULT_UNTIL_WIDTH,
                   help=f"the simulated sweeps' auto-grow width (default {DEFAULT_UNTIL_WIDTH:g}; 0 = off)")
    r.add_argument("--time-cap", type=positive_float, default=DEFAULT_TIME_CAP_S,
                   help=f"the simulated sweeps' time cap (default {DEFAULT_TIME_CAP_S:g})")


def repro_config(args: argparse.Namespace) -> repro_run.ReproConfig:
    grow = Grow(args.until_width, args.time_cap) if args.until_width else None
    return repro_run.ReproConfig(tuple(args.runs), args.rule, tuple(args.predict or ()), args.default_plan,
                                 args.sims, grow)


def _fio_check_arguments(f: argparse.ArgumentParser) -> None:
    f.add_argument("--scheduler", choices=SCHEDULERS, default="mq-deadline")
    f.add_argument("--uring-ab", action="store_true",
                   help="io_uring: also run ioload with its earlier ring set-up / reap sequence (the cause of a gap)")
    _common(f)
    f.set_defaults(rate=0.0)


def fio_check_config(args: argparse.Namespace) -> fio_check_run.FioCheckConfig:
    if args.wait == "spin":
        raise UserError("fio-check --wait spin: fio has no spinning wait to compare with (its thinktime_spin ran one "
                        "read in 2 s on this host); use --wait sleep, or kvds io bench --wait spin for kvds alone")
    args.device = device_of(args)
    cfg = fio_check_run.FioCheckConfig(workload_from(args), layout_from(args), args.scheduler, args.device,
                                       args.destroy_data, args.reps, args.uring_ab, args.verbose)
    _require(args, [])
    doctor.require("fio", area="io")
    return cfg


VERBS = (
    Verb("bench", "unloaded / baseline / separated critical-read latency and spill MB/s", _bench_arguments,
         bench_config, bench_run.run, render.bench, BenchSummary, dry_run=bench_run.dry_run,
         render_dry_run=render.bench_dry_run),
    Verb("sweep", f"scheduler x mapping grid: table, Pareto frontier, PNG scatter (default {DEFAULT_REPS} reps x "
                  f"{DEFAULT_DURATION_S:g} s, auto-grown)", _sweep_arguments, sweep_config, sweep_run.run,
         render.sweep, SweepSummary),
    Verb("repro", "does a sweep's verdict repeat? stored sweeps compared point by point; --predict: how often "
                  "sweeps of a given size would agree", _repro_arguments, repro_config, repro_run.run, render.repro,
         ReproSummary),
    Verb("fio-check", "unloaded QD1 latency, closed loop (default) or open loop at --rate N: kvds's reader vs fio "
                      "on the same device, with the same --wait", _fio_check_arguments, fio_check_config,
         fio_check_run.run, render.fio_check, FioCheckSummary),
)


def register(sub: argparse._SubParsersAction) -> None:
    io = sub.add_parser("io", help="I/O priority track: critical KV reads under spill pressure")
    verbs = io.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for verb in VERBS:
        add(verbs, verb)


def workload_from(args: argparse.Namespace) -> Workload:
    return Workload(engine=args.engine, duration_s=args.duration, read_bs=args.read_kib << 10, rate=args.rate,
                    spill_bs=args.spill_kib << 10, spill_qd=args.spill_qd, spill_kind=args.spill,
                    guard_us=args.guard_us, budget_devs=args.budget_devs, fsync_every=args.fsync_every_mib * MiB,
                    dirty_background_ratio=args.dirty_background_ratio, wait=args.wait)


def layout_from(args: argparse.Namespace) -> Layout:
    quick = getattr(args, "quick", False)
    kv = args.kv_mib or (QUICK_KV_MIB if quick else KV_MIB)
    spill = args.spill_mib or (QUICK_SPILL_MIB if quick else SPILL_MIB)
    lay = Layout(kv * MiB, spill * MiB)
    if args.read_kib << 10 > lay.kv_bytes or args.spill_kib << 10 > lay.spill_bytes:
        raise UserError("the KV and spill regions must each hold at least one read / one spill write")
    if (args.read_kib << 10) % 4096 or (args.spill_kib << 10) % 4096:
        raise UserError("O_DIRECT needs read and spill sizes that are multiples of 4 KiB")
    return lay


def device_of(args: argparse.Namespace) -> str:
    """--device, or model:NAME for --device-model NAME (the two name one device between them)."""
    if getattr(args, "device_model", None):
        if args.device != "loop":
            raise UserError(f"--device {args.device} and --device-model {args.device_model} name two devices; "
                            "give one")
        return MODEL_PREFIX + args.device_model
    return args.device


def _require(args: argparse.Namespace, mappings: list[str]) -> None:
    """Checks run where the command runs (on a --target host, not here): paths name that host's files."""
    if args.work_dir:
        os.environ["KVDS_WORK_DIR"] = str(scratch_dir(args.work_dir))  # paths.work_dir(): every scratch file
    device_spec(args.device)
    require_root("kvds io")
    # area "io" first: probing other areas (eBPF compiles, QEMU) costs minutes inside a guest lab
    doctor.require("loop", "ioprio", "blk.schedulers", "io.ioload", area="io")
    if args.engine == "io_uring":
        doctor.require("io_uring", area="io")
    for name in mappings:
        if name not in available_mappings() and not name.endswith(".toml"):
            raise UserError(f"unknown mapping {name!r} (available: {', '.join(available_mappings())})")


def sweep_plan(schedulers: list[str] | None, mappings: list[str] | None, quick: bool = False) -> dict[str, list[str]]:
    """Scheduler -> mappings. Neither flag: the default plan (DEFAULT_PLAN); --quick: its grid; either
    flag: the full grid of what was named, the defaults filling the other."""
    if quick:
        return {s: list(mappings or QUICK_MAPPINGS) for s in schedulers or DEFAULT_SCHEDULERS}
    if schedulers is None and mappings is None:
        return {s: list(ms) for s, ms in DEFAULT_PLAN.items()}
    return {s: list(mappings or DEFAULT_MAPPINGS) for s in schedulers or DEFAULT_SCHEDULERS}
