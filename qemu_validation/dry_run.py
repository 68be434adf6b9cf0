"""`kvds qemu run --dry-run`: the QEMU command line a guest run would start, built by the same functions
(guest_run.machine, qemu_cmd.command) and changing nothing: no kernel is built, no initramfs written, QEMU not started.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping

from harness.errors import UserError
from qemu_validation import build, cachedirs, guest_run, qemu_cmd


def plan(kernel_id: str | None, argv: list[str], share_dir: Path | None = None, *, host_root: bool = False,
         memory_mb: int = 1024, cpus: int = 1, extra_append: tuple[str, ...] = ()) -> dict[str, Any]:
    """What `guest_run.run_guest` would run: the kernel, the guest command and the QEMU argv. The log directory a run
    creates is shown as <log dir>; a kernel not built yet as <bzImage of LABEL> (the run would build it first)."""
    if share_dir is not None:
        share_dir = Path(share_dir).resolve()
        if not share_dir.is_dir():
            raise UserError(f"share directory {share_dir} does not exist")
    kb = build.find(kernel_id) if kernel_id else build.cached(guest_run.DEFAULT_SPEC)
    label = kb.label if kb else build.label_of(guest_run.DEFAULT_SPEC)
    bzimage = kb.bzimage if kb else Path(f"<bzImage of {label}>")
    log_dir = cachedirs.root() / "runs" / "<log dir>"
    m = guest_run.machine(bzimage, log_dir, share_dir, host_root=host_root, memory_mb=memory_mb, cpus=cpus,
                      extra_append=extra_append)
    return {"kernel": {"id": kb.id if kb else None, "label": label, "built": kb is not None},
            "guest_argv": list(argv), "qemu_argv": qemu_cmd.command(m, qemu_cmd.qemu_binary() or qemu_cmd.QEMU_BINARY)}


def render(p: Mapping[str, Any]) -> None:
    k = p["kernel"]
    print(f"kernel {k['label']}" + (f" ({k['id'][:12]})" if k["built"] else " (not built: the run builds it first)"))
    print(f"guest command (the initramfs's /init runs it): {shlex.join(p['guest_argv'])}")
    print("$ " + shlex.join(p["qemu_argv"]))
