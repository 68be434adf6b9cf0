"""`kvds vm bench` and `kvds vm compare`: one harness.verbs.Verb each. The config functions here parse the
arguments and check input and host before anything changes; kernel_vm/bench_run.py and kernel_vm/compare_run.py do
the work, render.py prints the typed summary, harness.emit prints --json (see kernel_vm/README.md)."""

from __future__ import annotations

import argparse

from harness.cli_args import percent, positive_int, require_root
from harness.errors import UserError
from harness.mapping import DEFAULT_MAPPING
from harness.remote import add_target_args
from harness.verbs import Verb, add
from kernel_vm import bench_run, churn, churn_run, compare_run, lazy_run, overcommit, overcommit_run, render
from kernel_vm.churn_summary import ChurnSummary
from kernel_vm.overcommit_summary import OvercommitSummary
from kernel_vm.lazy_summary import LazySummary
from kernel_vm.mix import DEFAULT_MIX, format_mix
from kernel_vm.repetition import PRESSURE_MODES
from kernel_vm.summary import BenchSummary, CompareSummary
from kernel_vm.swap_backend import BACKENDS


def _bench_arguments(b: argparse.ArgumentParser) -> None:
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
    add_target_args(b)  # --target guest / ssh://... / --hosts: harness/remote runs this same command there


def bench_config(args: argparse.Namespace) -> bench_run.BenchConfig:
    """Bad input (an arena larger than memory too) exits 2 before the root check: the plan parses every mapping."""
    if args.swap not in BACKENDS:
        raise UserError(f"--swap must be one of {', '.join(BACKENDS)}, not {args.swap!r}")
    cfg = bench_run.BenchConfig(mapping=args.mapping, baseline=args.baseline, arena_mb=args.arena_mb,
                                block_kb=args.block_kb, mix=args.mix, swap=args.swap, pressure_pct=args.pressure,
                                reps=args.reps, seed=args.seed, mglru=args.mglru,
                                mglru_min_ttl_ms=args.mglru_min_ttl_ms, damos=not args.no_damos,
                                pressure_mode=args.pressure_mode, ebpf=args.ebpf, reference=args.reference)
    bench_run.plan(cfg)
    require_root("kvds vm bench")
    return cfg


def _compare_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("run", help="run id, unique prefix, path or 'latest'")
    c.add_argument("--reference", default=None,
                   help="mapping or variant to judge against (default: the run's own --reference)")


def compare_config(args: argparse.Namespace) -> compare_run.CompareConfig:
    return compare_run.CompareConfig(args.run, args.reference)


BENCH = Verb("bench", "baseline (no intent) vs an intent mapping under memcg pressure", _bench_arguments,
             bench_config, bench_run.run, render.bench, BenchSummary)
COMPARE = Verb("compare", "judge a stored vm-bench run's decode-critical p99 against its reference again, "
                          "repetitions paired (kernel_vm/paired_p99.py)", _compare_arguments, compare_config,
               compare_run.run, render.compare, CompareSummary)


def _lazy_arguments(p: argparse.ArgumentParser) -> None:
    d = lazy_run.LazyConfig()
    p.add_argument("--mapping", default=d.mapping, help="mechanisms (harness/mappings names), comma-separated "
                                                        "(default %(default)s)")
    p.add_argument("--reference", default=d.reference, help="the mechanism the others are judged against "
                                                            "(default %(default)s: eager MADV_PAGEOUT)")
    p.add_argument("--pressures", default=d.pressures,
                   help="percent of the arena that may not stay resident, comma-separated; 0 writes no limit "
                        "(default %(default)s)")
    p.add_argument("--arena-mb", type=positive_int, default=d.arena_mb, help="arena in MiB (2^20 bytes; default 8)")
    p.add_argument("--block-kb", type=positive_int, default=d.block_kb, help="block in KiB (2^10 bytes; default 64)")
    p.add_argument("--mix", default=d.mix, help="class shares in percent (default %(default)s)")
    p.add_argument("--reps", type=positive_int, default=d.reps, help="repetitions per cell, alternating (default 3)")
    p.add_argument("--seed", type=int, default=d.seed, help="layout seed of repetition 0 (default 0)")
    p.add_argument("--mglru", choices=("off", "on", "keep"), default=d.mglru,
                   help="MGLRU state where /sys/kernel/mm/lru_gen exists (default off: the classic LRU)")
    add_target_args(p)


def lazy_config(args: argparse.Namespace) -> lazy_run.LazyConfig:
    cfg = lazy_run.LazyConfig(mapping=args.mapping, reference=args.reference, pressures=args.pressures,
                              arena_mb=args.arena_mb, block_kb=args.block_kb, mix=args.mix, reps=args.reps,
                              seed=args.seed, mglru=args.mglru)
    lazy_run.plan(cfg)
    require_root("kvds vm lazy")
    return cfg


LAZY = Verb("lazy", "lazy vs eager: what each mechanism writes to swap, refaults and the decode-critical p99 over a "
                    "pressure sweep", _lazy_arguments, lazy_config, lazy_run.run, render.lazy, LazySummary)


def _churn_arguments(p: argparse.ArgumentParser) -> None:
    d = churn_run.ChurnConfig()
    p.add_argument("--mechanisms", default=d.mechanisms, help="comma-separated (default %(default)s)")
    p.add_argument("--blocks", type=positive_int, default=d.blocks, help="KV blocks (default %(default)s)")
    p.add_argument("--block-kb", type=positive_int, default=d.block_kb, help="block in KiB (2^10 bytes; default 4)")
    p.add_argument("--requests", type=positive_int, default=d.requests, help="requests sharing the blocks "
                                                                             "(default %(default)s)")
    p.add_argument("--batch", type=positive_int, default=d.batch, help="requests decoding per step (default 8)")
    p.add_argument("--steps", type=positive_int, default=d.steps, help="decode steps (default %(default)s)")
    p.add_argument("--lifetime", type=positive_int, default=d.lifetime, help="steps a request lives (default 128)")
    p.add_argument("--layout", choices=churn.LAYOUTS, default=d.layout,
                   help="contiguous: a run of blocks per request; paged: blocks dealt out shuffled (default "
                        "contiguous)")
    p.add_argument("--step-ms", type=float, default=d.step_ms, help="decode step time for per-second figures "
                                                                    "(default 30)")
    p.add_argument("--reps", type=positive_int, default=d.reps, help="repetitions per mechanism (default 3)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the paged layout (default 0)")
    add_target_args(p)


def churn_config(args: argparse.Namespace) -> churn_run.ChurnConfig:
    cfg = churn_run.ChurnConfig(mechanisms=args.mechanisms, blocks=args.blocks, block_kb=args.block_kb,
                                requests=args.requests, batch=args.batch, steps=args.steps, lifetime=args.lifetime,
                                layout=args.layout, step_ms=args.step_ms, reps=args.reps, seed=args.seed)
    churn_run.plan(cfg)
    require_root("kvds vm churn")
    return cfg


CHURN = Verb("churn", "the calls and CPU time of keeping madvise, mlock or an mm_intent registration current in a "
                      "decode loop", _churn_arguments, churn_config, churn_run.run, render.churn, ChurnSummary)


def _overcommit_arguments(p: argparse.ArgumentParser) -> None:
    d = overcommit_run.OvercommitConfig()
    p.add_argument("--mechanisms", default=d.mechanisms, help="comma-separated (default %(default)s)")
    p.add_argument("--reference", default=d.reference, help="the mechanism the others are judged against "
                                                            "(default memcg)")
    p.add_argument("--rank", choices=overcommit.RANKS, default=d.rank,
                   help="what orders the critical tiers: deadline (same priority) or priority (no deadline)")
    p.add_argument("--arena-mb", type=positive_int, default=d.arena_mb, help="arena in MiB (2^20 bytes; default 8)")
    p.add_argument("--block-kb", type=positive_int, default=d.block_kb, help="block in KiB (2^10 bytes; default 64)")
    p.add_argument("--critical", type=percent, default=d.critical_pct,
                   help="share of the arena that is latency-critical, percent (default 80)")
    p.add_argument("--pressure", type=percent, default=d.pressure_pct,
                   help="share of the arena that may not stay resident; must exceed the spillable share "
                        "(default 40)")
    p.add_argument("--slo-us", type=float, default=d.slo_us,
                   help="a block is late when its slowest page read takes longer (default 50)")
    p.add_argument("--reps", type=positive_int, default=d.reps, help="repetitions per mechanism (default 3)")
    p.add_argument("--seed", type=int, default=d.seed, help="layout seed of repetition 0 (default 0)")
    p.add_argument("--mglru", choices=("off", "on", "keep"), default=d.mglru,
                   help="MGLRU for the whole run where /sys/kernel/mm/lru_gen exists (default off: the classic "
                        "LRU)")
    add_target_args(p)


def overcommit_config(args: argparse.Namespace) -> overcommit_run.OvercommitConfig:
    cfg = overcommit_run.OvercommitConfig(mechanisms=args.mechanisms, reference=args.reference, rank=args.rank,
                                          arena_mb=args.arena_mb, block_kb=args.block_kb,
                                          critical_pct=args.critical, pressure_pct=args.pressure,
                                          slo_us=args.slo_us, reps=args.reps, seed=args.seed, mglru=args.mglru)
    overcommit_run.plan(cfg)
    require_root("kvds vm overcommit")
    return cfg


OVERCOMMIT = Verb("overcommit", "more latency-critical memory than fits: which critical blocks each mechanism gives "
                                "up, late blocks and p99 per tier", _overcommit_arguments, overcommit_config,
                  overcommit_run.run, render.overcommit, OvercommitSummary)


def register(sub: argparse._SubParsersAction) -> None:
    vm = sub.add_parser("vm", help="the KV arena under memory pressure (madvise, memcg, swap, DAMON, MGLRU)")
    verbs = vm.add_subparsers(dest="vm_command", metavar="VERB", parser_class=type(vm))
    verbs.required = True
    for verb in (BENCH, COMPARE, LAZY, CHURN, OVERCOMMIT):
        add(verbs, verb)
