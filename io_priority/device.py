"""Which device an I/O benchmark may write to, and the kvds loop device it uses by default.

The benchmark writes spill data over the device, so the check is strict: never the root disk (/dev/vda here)
or anything on it, never a mounted or swap device (or one whose partition is mounted); a device or file that
holds data (a filesystem signature, an existing file) only with the explicit destructive-consent flag; never a
path that does not exist (kvds creates scratch files only in its work directory, --work-dir).
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UserError
from harness.journal import get_journal
from harness.knobs import create_dir, create_file, loop_attach
from harness.knobs.files import check_space
from harness.knobs.nullblk import create_nullb
from io_priority import device_model
from harness.knobs.guards import root_disks
from harness.paths import work_dir

MiB = 1 << 20
CONSENT_FLAG = "--destroy-data"
MODEL_PREFIX = "model:"
"""--device model:NAME (what --device-model NAME sets): a null_blk device built from io_priority/device_model.py."""


@dataclass(frozen=True)
class Layout:
    """Where the KV data lives and where spills go, in bytes from the device's start."""

    kv_bytes: int = 256 * MiB
    spill_bytes: int = 512 * MiB

    @property
    def total(self) -> int:
        return self.kv_bytes + self.spill_bytes

    @property
    def spill_offset(self) -> int:
        return self.kv_bytes


@dataclass
class Device:
    path: str  # the block device the benchmark opens
    kind: str  # "kvds-loop" (created here), "user-loop" (over a user's file), "block" (a user's device),
    # "model" (a null_blk device kvds created from a named device model; backing is the model's name)
    backing: str | None = None
    layout: Layout = field(default_factory=Layout)

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def dev_t(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return os.major(st.st_rdev), os.minor(st.st_rdev)

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "kind": self.kind, "backing": self.backing, "kv_bytes": self.layout.kv_bytes,
                "spill_bytes": self.layout.spill_bytes, "dev_t": "%d:%d" % self.dev_t}


def _sys_block(rdev: int) -> Path | None:
    want = f"{os.major(rdev)}:{os.minor(rdev)}"
    for d in Path("/sys/class/block").iterdir():
        try:
            if (d / "dev").read_text().strip() == want:
                return d
        except OSError:
            continue
    return None


def _whole_disk(sysdir: Path) -> str:
    return sysdir.resolve().parent.name if (sysdir / "partition").exists() else sysdir.name


def _related_devnums(sysdir: Path) -> set[str]:
    """major:minor of the device, its partitions, and its holders (so a mounted partition counts)."""
    out = set()
    for d in [sysdir, *sysdir.glob(f"{sysdir.name}*"), *(sysdir / "holders").glob("*")]:
        try:
            out.add((d / "dev").read_text().strip())
        except OSError:
            continue
    return out


def _mounted_devnums() -> set[str]:
    return {line.split()[2] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


def _swap_devices() -> set[str]:
    lines = Path("/proc/swaps").read_text().splitlines()[1:]
    return {os.path.realpath(line.split()[0]) for line in lines if line.strip()}


def fs_signature(path: str) -> str | None:
    """The filesystem/partition-table signature blkid finds on path, or None."""
    res = subprocess.run(["blkid", "-p", "-o", "export", path], capture_output=True, text=True)
    if res.returncode == 2:  # nothing found
        return None
    if res.returncode != 0:
        raise UserError(f"cannot probe {path} for a filesystem signature: {res.stderr.strip() or res.returncode}")
    fields = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    return fields.get("TYPE") or fields.get("PTTYPE") or "unknown signature"


def check_block_device(path: str, destroy_data: bool = False) -> None:
    """Refuse a block device kvds must not write to; raises UserError naming the reason."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise UserError(f"{path} is not a block device")
    sysdir = _sys_block(st.st_rdev)
    if sysdir is None:
        raise UserError(f"{path}: no /sys/class/block entry for {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    disk = _whole_disk(sysdir)
    if disk in root_disks() or disk == "vda":
        raise UserError(f"refusing {path}: it is (on) {disk}, the disk holding this machine's root filesystem")
    if _related_devnums(sysdir) & _mounted_devnums():
        raise UserError(f"refusing {path}: it (or a partition or holder of it) is mounted")
    if real in _swap_devices():
        raise UserError(f"refusing {path}: it is an active swap device")
    if not destroy_data:
        sig = fs_signature(real)
        if sig:
            raise UserError(f"refusing {path}: it holds a {sig} signature; pass {CONSENT_FLAG} to overwrite it")


SYSTEM_TREES = ("/dev", "/proc", "/sys")


def _under(path: str, trees: tuple[str, ...]) -> bool:
    return any(path == t or path.startswith(t + "/") for t in trees)


def device_spec(text: str) -> str:
    """What --device may name: 'loop', an existing block device or an existing regular file. Never a path
    kvds would have to create: a typo in a device name must not turn into a scratch file under /dev (a
    RAM-backed filesystem, so the "disk" benchmark would measure memory). New scratch files go only where the
    user asks for them (--work-dir)."""
    if text == "loop":
        return text
    if text.startswith(MODEL_PREFIX):
        device_model.model(text[len(MODEL_PREFIX):])  # a UserError naming the known models
        return text
    if not text:
        raise UserError("--device is empty: name 'loop', a block device or an existing regular file")
    real = os.path.realpath(text)
    if not os.path.exists(real):
        if _under(os.path.abspath(text), SYSTEM_TREES) or _under(real, SYSTEM_TREES):
            raise UserError(f"--device {text}: no such device")
        raise UserError(f"--device {text} does not exist: name a block device or an existing regular file "
                        "(a new scratch file: --device loop with --work-dir DIR)")
    mode = os.stat(real).st_mode
    if not (stat.S_ISBLK(mode) or stat.S_ISREG(mode)):
        raise UserError(f"--device {text} is neither a block device nor a regular file")
    return text


def scratch_dir(text: str) -> Path:
    """--work-dir: an existing directory for kvds's scratch files, never inside /dev, /proc or /sys."""
    real = os.path.realpath(text)
    if _under(real, SYSTEM_TREES) or _under(os.path.abspath(text), SYSTEM_TREES):
        raise UserError(f"--work-dir {text}: scratch files do not belong under /dev, /proc or /sys")
    if not os.path.isdir(real):
        raise UserError(f"--work-dir {text} is not an existing directory")
    return Path(real)


def check_file(path: str, destroy_data: bool = False) -> None:
    p = Path(path)
    if p.exists() and not p.is_file():
        raise UserError(f"{path} is neither a block device nor a regular file")
    if p.exists() and not destroy_data:
        raise UserError(f"refusing {path}: the file exists and its contents would be overwritten; "
                        f"pass {CONSENT_FLAG}, or use --device loop (a scratch file in --work-dir)")


def _lay_down_kv(path: str, layout: Layout) -> None:
    """Write real (incompressible, not sparse) KV data over the device's KV region."""
    chunk = os.urandom(4 * MiB)
    fd = os.open(path, os.O_WRONLY)
    try:
        off = 0
        while off < layout.total:
            n = min(len(chunk), layout.total - off)
            os.pwrite(fd, chunk[:n], off)
            off += n
        os.fsync(fd)
    finally:
        os.close(fd)


def prepare(spec: str = "loop", layout: Layout = Layout(), destroy_data: bool = False) -> Device:
    """The benchmark device: a fresh kvds loop device (default), a loop over a user's file, or a user's
    block device after the safety check. Everything created is journaled (restore removes it)."""
    device_spec(spec)
    if spec.startswith(MODEL_PREFIX):
        m = device_model.model(spec[len(MODEL_PREFIX):])
        dev = create_nullb(f"kvds-{os.getpid()}-{secrets.token_hex(2)}", m.nullb_settings(layout.total))
        return Device(dev, "model", m.name, layout)  # no data laid down: the model times requests, stores nothing
    if spec == "loop":
        check_space(work_dir() / "kv-backing.img", layout.total)  # before any scratch directory is made
        d = create_dir(work_dir() / f"io-{os.getpid()}-{secrets.token_hex(3)}")
        backing = create_file(d / "kv-backing.img", layout.total, fill=os.urandom(MiB))
        return Device(loop_attach(backing, direct_io=True), "kvds-loop", str(backing), layout)
    real = os.path.realpath(spec)
    if os.path.exists(real) and stat.S_ISBLK(os.stat(real).st_mode):
        check_block_device(real, destroy_data)
        size = int(Path(f"/sys/class/block/{Path(real).name}/size").read_text()) * 512
        if size < layout.total:
            raise UserError(f"{spec} has {size // MiB} MiB; the layout needs {layout.total // MiB} MiB")
        _lay_down_kv(real, layout)
        get_journal().owned_devices.add(Path(real).name)  # consented: its scheduler may be set for the run
        return Device(real, "block", None, layout)
    check_file(spec, destroy_data)
    p = Path(spec)  # exists: device_spec refused every path kvds would have to create
    if p.stat().st_size < layout.total:
        raise UserError(f"{spec} is smaller than the {layout.total // MiB} MiB the layout needs")
    _lay_down_kv(str(p), layout)
    return Device(loop_attach(p, direct_io=True), "user-loop", str(p.resolve()), layout)
