"""`kvds vm bench` and `kvds vm compare`: argument parsing only (kernel_vm/run.py runs the bench, render.py prints,
harness.emit prints --json; see kernel_vm/README.md)."""

from __future__ import annotations

import argparse

from harness.cli_args import add_json_flag, percent, positive_int, require_root
from harness.errors import UserError
from harness.mapping import DEFAULT_MAPPING
from harness.remote import add_target_args
from kernel_vm.mix import DEFAULT_MIX, format_mix
from kernel_vm.phases import PRESSURE_MODES
from kernel_vm.swap_backend import BACKENDS


def register(sub: argparse._SubParsersAction) -> None:
    vm = sub.add_parser("vm", help="the KV arena under memory pressure (madvise, memcg, swap, DAMON, MGLRU)")
    verbs = vm.add_subparsers(dest="vm_command", metavar="VERB", parser_class=type(vm))
    verbs.required = True
    b = verbs.add_parser("bench", help="baseline (no intent) vs an intent mapping under memcg pressure")
    b.add_argument("--mapping", default=DEFAULT_MAPPING,
                   help=f"intent mapping, or several comma-separated (default {DEFAULT_MAPPING})")
    b.add_argument("--reference", default=None,
                   help="one of --mapping the others are judged against (e.g. memcg-protect): decode-critical "
                        "swapped out and re-access p99 verdicts by interval")
    b.add_argument("--baseline", default="none", help="the no-intent reference mapping (default none)")
    b.add_argument("--arena-mb", type=positive_int, default=256, help="arena size in MiB (default 256)")
    b.add_argument("--block-kb", type=positive_int, default=64, help="KV block size in KiB (default 64)")
    b.add_argument("--mix", default=format_mix(DEFAULT_MIX), help="class shares in percent (default %(default)s)")
    b.add_argument("--swap", default="zram", help=f"swap backend: {', '.join(BACKENDS)} (default zram)")
    b.add_argument("--pressure", type=percent, default=30.0,
                   help="share of the arena that may not stay resident (default 30)")
    b.add_argument("--pressure-mode", choices=PRESSURE_MODES, default="limit",
                   help="limit: lower the squeezed group's limit; antagonist: a second process allocates PCT%% "
                        "of the arena in that group (default limit)")
    b.add_argument("--reps", type=positive_int, default=3, help="repetitions per variant, alternating (default 3)")
    b.add_argument("--seed", type=int, default=0, help="layout seed of repetition 0 (rep r uses seed+r; default 0)")
    b.add_argument("--mglru", choices=("auto", "on", "off", "both", "keep"), default="auto",
                   help="MGLRU variants where /sys/kernel/mm/lru_gen exists (auto: on and off)")
    b.add_argument("--mglru-min-ttl-ms", type=positive_int, default=None, help="min_ttl_ms in the MGLRU-on variant")
    b.add_argument("--ebpf", action="store_true",
                   help="record reclaim latency histograms with the eBPF track's probes (compiles once per rep)")
    b.add_argument("--no-damos", action="store_true", help="skip the DAMOS variant where DAMON is usable")
    add_json_flag(b)
    add_target_args(b)  # --target guest / ssh://... / --hosts: harness/remote runs this same command there
    b.set_defaults(func=run_bench)
    c = verbs.add_parser("compare", help="judge a stored vm-bench run's decode-critical p99 against its reference "
                                         "again, repetitions paired (kernel_vm/compare.py)")
    c.add_argument("run", help="run id, unique prefix, path or 'latest'")
    c.add_argument("--reference", default=None,
                   help="mapping or variant to judge against (default: the run's own --reference)")
    add_json_flag(c)
    c.set_defaults(func=run_compare)


def run_bench(args: argparse.Namespace) -> int:
    from harness.emit import emit
    from kernel_vm import render
    from kernel_vm.run import BenchConfig, bench, plan

    if args.swap not in BACKENDS:
        raise UserError(f"--swap must be one of {', '.join(BACKENDS)}, not {args.swap!r}")
    cfg = BenchConfig(mapping=args.mapping, baseline=args.baseline, arena_mb=args.arena_mb, block_kb=args.block_kb,
                      mix=args.mix, swap=args.swap, pressure_pct=args.pressure, reps=args.reps, seed=args.seed,
                      mglru=args.mglru, mglru_min_ttl_ms=args.mglru_min_ttl_ms, damos=not args.no_damos,
                      pressure_mode=args.pressure_mode, ebpf=args.ebpf, reference=args.reference)
    p = plan(cfg)  # bad input (an arena larger than memory too): exit 2 before the root check; mappings parsed once
    require_root("kvds vm bench")
    run, summary = bench(p)
    emit(run, summary.as_dict(), args.json, lambda _: render.bench(summary, run.path))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from harness.emit import emit
    from harness.results import ResultStore
    from kernel_vm import render
    from kernel_vm.compare import compare_stored

    out = compare_stored(ResultStore().get(args.run), args.reference)
    emit(None, out.as_dict(), args.json, render.compare)
    return 0
