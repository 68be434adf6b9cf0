"""`kvds ebpf record`, `kvds ebpf overhead` and `kvds ebpf load-time`: arguments, and the typed config each verb
runs from (harness/verbs.py), with every input and host check done before anything changes."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from harness import verbs
from harness.cli_args import positive_float, positive_int, require_root
from harness.errors import UserError
from harness.results import Filed

from ebpf import load_time_run, overhead_run, record_run, render
from ebpf.summary import LoadTimeSummary, OverheadSummary, RecordSummary

DEFAULT_PROBE_SETS = ("blk", "reclaim", "faults", "blk,reclaim,faults")


def _record_arguments(r: argparse.ArgumentParser) -> None:
    r.description = "kvds ebpf record [--probe blk,reclaim,faults,delays] [--duration S | -- CMD ARGS...]"
    r.add_argument("--probe", default="blk,reclaim,faults,delays",
                   help="comma-separated probe sets: blk, reclaim, faults, delays (default: all)")
    r.add_argument("--duration", type=positive_float, help="record for S seconds (the default without CMD: 5)")
    r.add_argument("--device", action="append", default=[], help="only this block device (repeatable)")
    r.add_argument("--pid", action="append", type=positive_int, default=[],
                   help="only this process and its children (repeatable)")
    r.add_argument("--cgroup", action="append", default=[], help="only tasks in this cgroup directory (repeatable)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNG per histogram")
    r.add_argument("--verbose", action="store_true", help="print the commands that built the BPF object loaded")
    r.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- CMD ARGS...: record while CMD runs (only CMD and its children)")


def record_config(args: argparse.Namespace) -> record_run.RecordConfig:
    from ebpf.recorder import kernel_dev, parse_probes

    cmd = list(args.command or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.command and not cmd:
        raise UserError("nothing after --: give a command to run")
    if cmd and args.duration is not None:
        raise UserError("give either --duration or -- CMD, not both")
    if cmd and (args.pid or args.cgroup):
        raise UserError("-- CMD records CMD and its children; --pid/--cgroup apply to --duration recordings")
    gone = [pid for pid in args.pid if not os.path.exists(f"/proc/{pid}")]
    if gone:  # a filter on a process that does not exist would record nothing and look like an idle one
        raise UserError(f"--pid {gone[0]}: no such process")
    for dev in args.device:
        kernel_dev(dev)  # not a block device: a UserError naming it
    probes = parse_probes(args.probe)
    require_root("kvds ebpf record")
    duration = args.duration if args.duration is not None else (None if cmd else 5.0)
    return record_run.RecordConfig(probes, duration, tuple(cmd), tuple(args.device), tuple(args.pid),
                                   tuple(args.cgroup), plots=not args.no_plots, verbose=args.verbose)


def _overhead_arguments(o: argparse.ArgumentParser) -> None:
    o.add_argument("--probe", default="blk", help="probe sets to attach in the 'with' runs (default blk)")
    o.add_argument("--reps", type=positive_int, default=4, help="repetitions per variant, ABBA order (default 4)")
    o.add_argument("--seconds", type=positive_float, default=3.0, help="seconds per run (default 3)")
    o.add_argument("--size-mib", type=positive_int, default=256, help="loop device size in MiB (default 256)")
    o.add_argument("--block-kib", type=positive_int, default=4, help="read size in KiB (default 4)")
    o.add_argument("--prog-stats", action="store_true",
                   help="also report runs and ns inside each program (sets kernel.bpf_stats_enabled=1 meanwhile)")


def overhead_config(args: argparse.Namespace) -> overhead_run.OverheadConfig:
    from ebpf.recorder import parse_probes

    cfg = overhead_run.OverheadConfig(parse_probes(args.probe), reps=args.reps, seconds=args.seconds,
                                      size_mib=args.size_mib, block_kib=args.block_kib, prog_stats=args.prog_stats)
    require_root("kvds ebpf overhead")
    return cfg


def _load_time_arguments(t: argparse.ArgumentParser) -> None:
    t.description = "kvds ebpf load-time [--probe-set blk] [--probe-set blk,reclaim,faults]... [--runs 5]"
    t.add_argument("--probe-set", action="append", default=[],
                   help=f"probe sets loaded together (repeatable; default: {' '.join(DEFAULT_PROBE_SETS)})")
    t.add_argument("--runs", type=positive_int, default=5, help="runs per probe set (default 5)")


def load_time_config(args: argparse.Namespace) -> load_time_run.LoadTimeConfig:
    from ebpf.recorder import parse_probes

    sets = [parse_probes(s) for s in (args.probe_set or DEFAULT_PROBE_SETS)]
    if any("delays" in s for s in sets):
        raise UserError("load-time measures BPF programs; 'delays' (taskstats) loads none")
    if len(set(sets)) != len(sets):
        raise UserError("--probe-set: each probe set once")
    require_root("kvds ebpf load-time")
    return load_time_run.LoadTimeConfig(tuple(sets), runs=args.runs)


RECORD = verbs.Verb("record", "record histograms for a duration or around a command", _record_arguments,
                    record_config, record_run.run, render.record, RecordSummary)
OVERHEAD = verbs.Verb("overhead", "IOPS of an O_DIRECT read loop on a kvds loop device with/without probes",
                      _overhead_arguments, overhead_config, overhead_run.run, render.overhead, OverheadSummary)
LOAD_TIME = verbs.Verb("load-time", "load+attach seconds per probe set, probe sets alternating (ABBA)",
                       _load_time_arguments, load_time_config, load_time_run.run, render.load_time, LoadTimeSummary)


def _record_then_status(args: argparse.Namespace) -> int:
    """`kvds ebpf record -- CMD` fails (exit 1) when CMD failed: the recorded command's status, kept in the
    summary, decides the exit status after the usual run, render or emit."""
    filed: list[Filed[RecordSummary]] = []

    def run(cfg: record_run.RecordConfig) -> Filed[RecordSummary]:
        filed.append(record_run.run(cfg))
        return filed[0]

    verbs.execute(dataclasses.replace(RECORD, run=run), args)
    return 1 if filed and filed[0].summary.command_status else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ebpf", help="tracepoint latency histograms (block I/O by priority, reclaim), faults, delays")
    group: Any = p.add_subparsers(dest="verb_name", metavar="VERB")
    group.required = True
    record = verbs.add(group, RECORD)
    record.set_defaults(func=_record_then_status)
    verbs.add(group, OVERHEAD)
    verbs.add(group, LOAD_TIME)
