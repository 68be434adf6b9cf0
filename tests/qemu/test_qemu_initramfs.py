"""The guest's /init and initramfs contents (pure: checked on the host with busybox, no QEMU)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qemu_validation.boot import cpio, initramfs


def test_archive_has_what_init_needs(tmp_path: Path) -> None:
    extra = tmp_path / "tool"
    extra.write_bytes(b"\x7fELF fake")
    out = initramfs.build(tmp_path / "i.cpio", ["echo", "a b"], {"bin/tool": extra}, share=tmp_path)
    entries = {n: (m, d) for n, m, d in cpio.parse(out.read_bytes())}
    assert {"init", "bin/busybox", "dev/console", "bin/tool"} <= set(entries)
    assert entries["init"][0] & 0o111 and entries["bin/tool"][1] == b"\x7fELF fake"
    script = entries["init"][1].decode()
    assert "echo 'a b'" in script                       # argv is shell-quoted, not re-split
    assert "mount -t 9p" in script and "kvdsshare /share" in script
    assert "mount -t debugfs" in script
    assert initramfs.STATUS_MARKER in script and "of=/dev/port" in script and "seek=244" in script


def test_host_root_chroots_with_share_at_its_host_path(tmp_path: Path) -> None:
    script = initramfs.init_script(["python3", "-V"], tmp_path, host_root=True, cwd="/work")
    assert "kvdsroot /host" in script and f"/host{tmp_path}" in script
    assert "chroot /host /bin/sh -c" in script and "cd /work" in script


@pytest.mark.parametrize("status,byte", [(0, 0), (7, 7), (127, 127), (200, 127)])
def test_exit_byte_encoding_in_busybox_sh(status: int, byte: int) -> None:
    """The exact shell lines /init uses to turn a status into the byte written to the debug-exit port."""
    script = initramfs.init_script(["true"], None, False)
    lines = script.splitlines()
    clamp = next(l for l in lines if l.startswith("v=$st"))
    emit = next(l for l in lines if "of=/dev/port" in l).split(" | dd ")[0]
    bb = str(initramfs.busybox_path())
    out = subprocess.run([bb, "sh", "-c", f"st={status}; {clamp}; {emit}"], capture_output=True, check=True).stdout
    assert out == bytes([byte])


def test_checkout_under_tmp_stays_visible_under_host_root(tmp_path: Path) -> None:
    """The guest mounts its own tmpfs over the host's /tmp: a checkout or venv there is bound back from the host's
    /tmp (kept aside first), before the share, so `kvds` run from a clone in /tmp still finds itself."""
    assert initramfs.tmp_tops(["/tmp/c/x", "/tmp/c/.venv", "/tmp/d e/f", "/work/main", "/tmp", "/tmpx/y"]) == \
        ["/tmp/c", "/tmp/d e"]
    share = Path("/tmp/c/results/guest")
    lines = initramfs.init_script(["python3", "-V"], share, host_root=True, cwd="/tmp/c",
                                  keep=("/tmp/c/.venv", "/opt/v")).splitlines()
    aside = lines.index("mkdir -p /.hosttmp && mount --bind /host/tmp /.hosttmp")
    cover = next(i for i, l in enumerate(lines) if l.startswith("for d in proc sys dev tmp"))
    back = next(i for i, l in enumerate(lines) if "mount --bind /.hosttmp/c /host/tmp/c" in l)
    shared = next(i for i, l in enumerate(lines) if f"/host{share}" in l and "mount --bind /share" in l)
    assert aside < cover < back < shared
    assert not any("/opt/v" in l for l in lines)
    plain = initramfs.init_script(["true"], None, host_root=True, cwd="/work/main")
    assert ".hosttmp/" not in plain
