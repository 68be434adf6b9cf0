"""`kvds ebpf record` and `kvds ebpf overhead`."""

from __future__ import annotations

import argparse
import os
import sys

from harness.cli_args import add_json_flag, positive_float, positive_int, require_root
from harness.emit import emit
from harness.errors import UserError
from harness.progress import say


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ebpf", help="tracepoint latency histograms (block I/O by priority, reclaim), faults, delays")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    r = verbs.add_parser("record", help="record histograms for a duration or around a command",
                         description="kvds ebpf record [--probe blk,reclaim,faults,delays] "
                                     "[--duration S | -- CMD ARGS...]")
    r.add_argument("--probe", default="blk,reclaim,faults,delays",
                   help="comma-separated probe sets: blk, reclaim, faults, delays (default: all)")
    r.add_argument("--duration", type=positive_float, help="record for S seconds (the default without CMD: 5)")
    r.add_argument("--device", action="append", default=[], help="only this block device (repeatable)")
    r.add_argument("--pid", action="append", type=positive_int, default=[],
                   help="only this process and its children (repeatable)")
    r.add_argument("--cgroup", action="append", default=[], help="only tasks in this cgroup directory (repeatable)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNG per histogram")
    r.add_argument("--verbose", action="store_true", help="print the commands that built the BPF object loaded")
    add_json_flag(r)
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...: record while CMD runs (only CMD and its children)")
    r.set_defaults(func=run_record)

    o = verbs.add_parser("overhead", help="IOPS of an O_DIRECT read loop on a kvds loop device with/without probes")
    o.add_argument("--probe", default="blk", help="probe sets to attach in the 'with' runs (default blk)")
    o.add_argument("--reps", type=positive_int, default=4, help="repetitions per variant, ABBA order (default 4)")
    o.add_argument("--seconds", type=positive_float, default=3.0, help="seconds per run (default 3)")
    o.add_argument("--size-mib", type=positive_int, default=256, help="loop device size in MiB (default 256)")
    o.add_argument("--block-kib", type=positive_int, default=4, help="read size in KiB (default 4)")
    o.add_argument("--prog-stats", action="store_true",
                   help="also report runs and ns inside each program (sets kernel.bpf_stats_enabled=1 meanwhile)")
    add_json_flag(o)
    o.set_defaults(func=run_overhead)

    t = verbs.add_parser("load-time", help="load+attach seconds per probe set, probe sets alternating (ABBA)",
                         description="kvds ebpf load-time [--probe-set blk] [--probe-set blk,reclaim,faults]... "
                                     "[--runs 5]")
    t.add_argument("--probe-set", action="append", default=[],
                   help="probe sets loaded together (repeatable; default: blk, reclaim, faults, blk,reclaim,faults)")
    t.add_argument("--runs", type=positive_int, default=5, help="runs per probe set (default 5)")
    add_json_flag(t)
    t.set_defaults(func=run_load_time)


def _command(args: argparse.Namespace) -> list[str]:
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
    return cmd


def run_record(args: argparse.Namespace) -> int:
    from ebpf.recorder import parse_probes
    from ebpf.record import RecordConfig, record

    cmd = _command(args)
    probes = parse_probes(args.probe)
    require_root("kvds ebpf record")
    duration = args.duration if args.duration is not None else (None if cmd else 5.0)
    cfg = RecordConfig(tuple(probes), duration, tuple(cmd), tuple(args.device), tuple(args.pid),
                       tuple(args.cgroup), plots=not args.no_plots)
    out = record(cfg)
    if args.verbose and out.commands is not None:
        from ebpf.objects import shell_line

        lines = [shell_line(c) for c in out.commands["built_by"] or []] or [f"({out.commands['note']})"]
        print(f"BPF object {out.commands['object']}, built by:", *lines, sep="\n  ", file=sys.stderr)
    emit(out.run, out.results, args.json, lambda _: _render(out))
    status = out.summary.command_status
    if status:
        say(f"command exited with status {status}")
    return 0 if not status else 1


def _render(out) -> None:
    from ebpf.report import format_results

    print(format_results(out.results))
    detail = f" ({out.summary.backend_detail})" if out.summary.backend_detail else ""
    print(f"\nbackend {out.summary.backend}{detail}, load+attach {out.results['load_attach_s']} s")
    print(f"run {out.run.run_id}: {out.run.path} ({out.pngs} PNG{'s' if out.pngs != 1 else ''})")


def run_overhead(args: argparse.Namespace) -> int:
    from ebpf.overhead import OverheadConfig, measure_overhead
    from ebpf.recorder import parse_probes
    from ebpf.render import format_overhead

    cfg = OverheadConfig(parse_probes(args.probe), reps=args.reps, seconds=args.seconds,
                         size_mib=args.size_mib, block_kib=args.block_kib,
                         prog_stats=args.prog_stats)
    require_root("kvds ebpf overhead")
    m = measure_overhead(cfg)
    emit(m.run, m.summary.as_dict(), args.json, lambda _: print(format_overhead(m.summary, str(m.run.path))))
    return 0


def run_load_time(args: argparse.Namespace) -> int:
    from ebpf.loadtime import LoadTimeConfig, measure_load_times
    from ebpf.recorder import parse_probes
    from ebpf.render import format_load_times

    sets = [parse_probes(s) for s in (args.probe_set or ["blk", "reclaim", "faults", "blk,reclaim,faults"])]
    if any("delays" in s for s in sets):
        raise UserError("load-time measures BPF programs; 'delays' (taskstats) loads none")
    if len(set(sets)) != len(sets):
        raise UserError("--probe-set: each probe set once")
    require_root("kvds ebpf load-time")
    t = measure_load_times(LoadTimeConfig(tuple(tuple(s) for s in sets), runs=args.runs))
    emit(t.run, t.summary.as_dict(), args.json, lambda _: print(format_load_times(t.summary, str(t.run.path))))
    return 0
