"""`kvds qemu run --dry-run`: the QEMU command line a guest run would start, built by the same functions
(guest_command.machine, qemu_cmd.command) and changing nothing: no kernel is built, no initramfs written, QEMU not started.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from qemu_validation.boot import guest_command, qemu_cmd
from qemu_validation.kernel import build, cachedirs


@dataclass(frozen=True)
class DryRunPlan:
    """What `kvds qemu run --dry-run` prints (its --json summary)."""
    kernel: dict[str, Any]     # id (None when not built), label, built
    guest_argv: list[str]      # the command the initramfs's /init runs
    qemu_argv: list[str]       # the QEMU command line (the log directory shown as <log dir>)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(cfg: guest_command.RunConfig) -> DryRunPlan:
    """What `guest_command.run` would run: the kernel, the guest command and the QEMU argv. The log directory a run
    creates is shown as <log dir>; a kernel not built yet as <bzImage of LABEL> (the run would build it first)."""
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
    return DryRunPlan(kernel={"id": kb.id if kb else None, "label": label, "built": kb is not None},
                      guest_argv=list(cfg.command),
                      qemu_argv=qemu_cmd.command(m, qemu_cmd.qemu_binary() or qemu_cmd.QEMU_BINARY))
