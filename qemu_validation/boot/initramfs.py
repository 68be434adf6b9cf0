"""The guest's root filesystem: static busybox, an /init script, the command to run and extra binaries.

/init mounts proc, sys, devtmpfs, debugfs and tmpfs, mounts the 9p share (and, on request, the host's root
read-only, chrooting into it so host tools such as the kvds venv run unchanged), runs the command, prints its
status as a console marker and reports it through isa-debug-exit by writing one byte to /dev/port.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from harness.errors import UserError
from qemu_validation.boot import cpio, qemu_cmd

GUEST_SHARE = "/share"
STATUS_MARKER = "KVDS-GUEST-STATUS:"
START_MARKER = "KVDS-GUEST-START"


def busybox_path() -> Path:
    for cand in ("/bin/busybox", "/usr/bin/busybox"):
        if Path(cand).is_file():
            return Path(cand)
    found = shutil.which("busybox")
    if not found:
        raise UserError("busybox is not installed (harness/setup installs busybox-static)")
    return Path(found)


def tmp_tops(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The top directories under /tmp that hold `paths` (a checkout, its venv): the guest mounts its own tmpfs
    over the host's /tmp, so these are bound back in from the host, or the checkout would vanish in the guest."""
    tops: list[str] = []
    for p in paths:
        parts = Path(p).parts
        if len(parts) > 2 and parts[:2] == ("/", "tmp"):
            top = "/tmp/" + parts[2]
            if top not in tops:
                tops.append(top)
    return tops


def init_script(argv: list[str], share: Path | None, host_root: bool, cwd: str = "/",
                keep: tuple[str, ...] = ()) -> str:
    """The /init shell script; `share` is the host directory shared at /share (and at its own path under host_root).

    `keep`: host paths the command needs (its working directory, the checkout, the venv); under host_root any of
    them below /tmp stays visible through the guest's own /tmp."""
    cmd = shlex.join(argv)
    lines = [
        "#!/bin/busybox sh",
        "/bin/busybox --install -s /bin",
        "export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=dumb",
        "mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev",
        "mount -t debugfs debugfs /sys/kernel/debug; mount -t tmpfs tmp /tmp",
        "mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm",
        "NINEP='-o trans=virtio,version=9p2000.L,msize=262144,cache=none'",
    ]
    if share is not None:
        lines.append(f"mkdir -p {GUEST_SHARE} && mount -t 9p $NINEP {qemu_cmd.SHARE_TAG} {GUEST_SHARE}"
                     f" || echo 'kvds: cannot mount the share'")
    if host_root:
        lines += [
            f"mkdir -p /host && mount -t 9p $NINEP,ro {qemu_cmd.ROOT_TAG} /host || echo 'kvds: cannot mount host root'",
            # The host's /tmp, kept aside before the guest's tmpfs covers it (see tmp_tops).
            "mkdir -p /.hosttmp && mount --bind /host/tmp /.hosttmp",
            "for d in proc sys dev tmp; do mount --bind /$d /host/$d; done",
            "mount --bind /sys/kernel/debug /host/sys/kernel/debug",
            # /run is a tmpfs on a booted system; the read-only host copy would refuse kvds's machine-wide state.
            "mount -t tmpfs run /host/run",
        ]
        for top in tmp_tops([cwd, *keep]):
            q = shlex.quote(top)
            lines.append(f"mkdir -p /host{q} && mount --bind /.hosttmp{shlex.quote(top[4:])} /host{q}"
                         f" || echo 'kvds: cannot keep {top} visible'")
        if share is not None:
            # After the /tmp bind: a share under /tmp must be re-created inside the guest's tmpfs.
            target = shlex.quote("/host" + str(share))
            lines.append(f"mkdir -p {target} 2>/dev/null; mount --bind {GUEST_SHARE} {target}"
                         f" || echo 'kvds: cannot mount the share at {share}'")
        run = f"chroot /host /bin/sh -c {shlex.quote(f'cd {shlex.quote(cwd)} && exec {cmd}')}"
    else:
        run = f"(cd {shlex.quote(cwd)} && {cmd})"
    lines += [
        f"echo {START_MARKER}",
        f"{run} </dev/console",
        "st=$?",
        "sync",
        f"echo \"{STATUS_MARKER} $st\"",
        "v=$st; [ $v -gt 127 ] && v=127",
        # One byte to the isa-debug-exit port: QEMU exits with (v << 1) | 1.
        f"printf \"$(printf '\\\\%03o' $v)\" | dd of=/dev/port bs=1 seek={qemu_cmd.DEBUG_EXIT_PORT} count=1 2>/dev/null",
        "echo 'kvds: the debug-exit port did not stop QEMU'; poweroff -f",
    ]
    return "\n".join(lines) + "\n"


def build(out: Path, argv: list[str], files: dict[str, Path] | None = None, share: Path | None = None,
          host_root: bool = False, cwd: str = "/", keep: tuple[str, ...] = ()) -> Path:
    """Write the initramfs for one boot to `out` (uncompressed newc; the kernel needs nothing else)."""
    a = cpio.Archive()
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root", "etc"):
        a.add_dir(d)
    a.add_char_device("dev/console", 5, 1)
    a.add_char_device("dev/null", 1, 3, 0o666)
    a.add_file("bin/busybox", busybox_path().read_bytes(), 0o755)
    a.add_file("init", init_script(argv, share, host_root, cwd, keep).encode(), 0o755)
    a.add_file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    for guest_path, host_path in (files or {}).items():
        a.add_file(guest_path, host_path.read_bytes(), 0o755)
    out.write_bytes(a.to_bytes())
    return out
