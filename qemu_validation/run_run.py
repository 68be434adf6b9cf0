"""`kvds qemu run -- CMD...`: boot a kernel and run one command in it (boot.guest_command does the boot); its
summary is the boot (runner.BootResult, field for field) and its exit status the command's. `--dry-run` plans the
same machine (guest_command.machine, qemu_cmd.command) and changes nothing: no kernel built, no initramfs written,
QEMU not started. Nothing is filed in the results store: the console log stays in the lab's cache (its path is in
the summary)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.results import Filed, StoredSummary
from qemu_validation.boot import guest_command, qemu_cmd
from qemu_validation.boot.runner import BootResult
from qemu_validation.kernel import build, cachedirs


@dataclass(frozen=True)
class RunConfig:
    """One `kvds qemu run`: the kernel, the command and the machine it runs on."""
    command: tuple[str, ...]
    kernel: str | None = None              # a build id, prefix or label; None: the default debug kernel
    share: Path | None = None              # host directory mounted read-write at /share
    host_root: bool = False                # chroot into the host's root (9p, read-only) to run the command
    timeout: float = 600.0
    memory_mb: int = 1024
    cpus: int = 1
    append: tuple[str, ...] = ()           # extra kernel command-line words
    icount_shift: int | None = None        # instruction-count time (qemu_cmd.icount_args); None: real time
    verbose: bool = False                  # print the QEMU command line (on stderr) before it runs


@dataclass(frozen=True)
class RunSummary(BootResult):
    """`kvds qemu run`'s summary: the guest boot that ran the command (its fields are runner.BootResult's, the
    `qemu.run` rows of docs/results.md)."""


@dataclass(frozen=True)
class RunPlan(StoredSummary):
    """What `kvds qemu run --dry-run` prints (its --json summary)."""
    kernel: dict[str, Any]     # id (None when not built), label, built
    guest_argv: list[str]      # the command the initramfs's /init runs
    qemu_argv: list[str]       # the QEMU command line (the log directory shown as <log dir>)


def run(cfg: RunConfig) -> Filed[RunSummary]:
    """Boot cfg.kernel and run cfg.command in it."""
    if cfg.verbose:
        print("Running with: $ " + shlex.join(plan(cfg).qemu_argv), file=sys.stderr)
    res = guest_command.boot_and_run(cfg.kernel, list(cfg.command), cfg.share, timeout=cfg.timeout,
                                     host_root=cfg.host_root, memory_mb=cfg.memory_mb, cpus=cfg.cpus,
                                     extra_append=cfg.append, icount_shift=cfg.icount_shift)
    return Filed(None, RunSummary(**{f.name: getattr(res, f.name) for f in fields(res)}))


def exit_status(summary: RunSummary) -> int:
    """kvds's exit status: the guest command's; 124 on a timeout, 125 when the kernel splatted or never reported."""
    return guest_command.exit_status(summary)


def plan(cfg: RunConfig) -> RunPlan:
    """What `run` would run: the kernel, the guest command and the QEMU argv. The log directory a run creates is
    shown as <log dir>; a kernel not built yet as <bzImage of LABEL> (the run would build it first)."""
    share_dir = cfg.share
    if share_dir is not None:
        share_dir = Path(share_dir).resolve()
        if not share_dir.is_dir():
            raise UserError(f"share directory {share_dir} does not exist")
    kb = build.find(cfg.kernel) if cfg.kernel else build.cached(guest_command.DEFAULT_SPEC)
    label = kb.label if kb else build.label_of(guest_command.DEFAULT_SPEC)
    bzimage = kb.bzimage if kb else Path(f"<bzImage of {label}>")
    log_dir = cachedirs.root() / "runs" / "<log dir>"
    m = guest_command.machine(bzimage, log_dir, share_dir, host_root=cfg.host_root, memory_mb=cfg.memory_mb,
                              cpus=cfg.cpus, extra_append=cfg.append, icount_shift=cfg.icount_shift)
    return RunPlan(kernel={"id": kb.id if kb else None, "label": label, "built": kb is not None},
                   guest_argv=list(cfg.command),
                   qemu_argv=qemu_cmd.command(m, qemu_cmd.qemu_binary() or qemu_cmd.QEMU_BINARY))


def dry_run(cfg: RunConfig) -> Filed[RunPlan]:
    """`kvds qemu run --dry-run`: the plan, nothing changed, nothing filed."""
    return Filed(None, plan(cfg))
