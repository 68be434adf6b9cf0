"""The arguments that choose a guest kernel, shared by every `kvds qemu` verb that boots one (build, validate,
exit-bench, reclaim-bench): a build by --kernel, or the recipe --source/--patches/--fragment (+ --config) that
describes one. A module of its own so that a verb's module (reclaim_bench) reuses them without importing the cli
that registers it."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import UserError
from qemu_validation.kernel import build


def add_spec_args(p: argparse.ArgumentParser) -> None:
    """--source/--patches/--fragment: the recipe of a kernel (build.BuildSpec without its debug switch)."""
    p.add_argument("--source", default=build.DEFAULT_SOURCE, help="debian-6.12, a kernel tarball or a source tree")
    p.add_argument("--patches", default=",".join(build.DEFAULT_PATCHES),
                   help="series under kernel_patches/ applied in order (comma-separated), or none")
    p.add_argument("--fragment", type=Path, action="append", default=[], metavar="FILE",
                   help="extra Kconfig fragment (repeatable)")


def add_kernel_args(p: argparse.ArgumentParser) -> None:
    """The guest benches' kernel choice: --kernel builds (alternated) or the spec --config/--source/--patches."""
    p.add_argument("--kernel", metavar="ID", action="append", default=[],
                   help="a build to boot (repeatable: kernels alternate, the first is the reference); default: "
                        "the kernel --config/--source/--patches describe")
    add_spec_args(p)
    p.add_argument("--config", choices=("debug", "base"), default="debug",
                   help="without --kernel: debug (KASAN + lockdep + kmemleak, what validate uses) or base "
                        "(the same kernel without the debug instrumentation)")


def spec_of(args: argparse.Namespace, kasan: bool) -> build.BuildSpec:
    """The BuildSpec that add_spec_args' arguments describe."""
    return build.BuildSpec(source=args.source, patches=build.parse_patches(args.patches), kasan=kasan,
                           fragments=tuple(args.fragment))


def bench_kernels(args: argparse.Namespace) -> tuple[list[str], build.BuildSpec]:
    """add_kernel_args' choice: the builds named by --kernel, else the spec described (UserError when both)."""
    if args.kernel and (args.config != "debug" or args.source != build.DEFAULT_SOURCE
                        or args.patches != ",".join(build.DEFAULT_PATCHES) or args.fragment):
        raise UserError("--kernel names a build; --config, --source, --patches and --fragment describe one: "
                        "give one or the other")
    return list(args.kernel), spec_of(args, args.config == "debug")
