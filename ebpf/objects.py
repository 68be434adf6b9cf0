"""Compile-once BPF objects for the libbpf backend: vmlinux.h from the running kernel's BTF, clang -target bpf,
cached by content so a recording only opens a finished object (no clang per session).

Cache: $KVDS_BPF_OBJECTS, else /var/cache/kvds/bpf-objects (outside the checkout: survives fresh clones).
An object is named by the sha256 of its source, the clang flags and the kernel build (uname release + version,
because vmlinux.h comes from that kernel). Accesses to trace_event_raw_* records carry CO-RE relocations, so
an object compiled on one kernel loads on another; the kernel key only avoids reusing a stale vmlinux.h.
Compile at set-up (harness/setup/provision-bpf-objects.sh runs `python -m ebpf.objects`) or on first use.
The commands that build an object come from one pure function (`commands`); the ones that built a cached object
are kept beside it (<object>.argv.json), so a recording can say what produced the object it loaded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.errors import Unavailable

SOURCE = Path(__file__).resolve().parent / "bpf_src" / "kvds.bpf.c"
NET_SOURCE = SOURCE.with_name("net_trace.bpf.c")  # ebpf/net_trace.py's programs
SOURCES = (SOURCE, NET_SOURCE)  # every object kvds loads
HEADERS = SOURCE.parent  # kvds's own BPF headers (kvds_helpers.h), on the include path of every object
VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
BPF_HEADERS = Path("/usr/include/bpf/bpf_helpers.h")  # Debian's libbpf-dev
CFLAGS = ("-target", "bpf", "-D__TARGET_ARCH_x86", "-O2", "-g", "-Wall", "-Wno-unused-function")
DEFAULT_ROOT = "/var/cache/kvds/bpf-objects"

# The page-fault record is declared by hand in kvds.bpf.c (x86 exception events are not in the kernel's BTF):
# (field, offset, size) as tracefs must print them for that declaration to be right.
FAULT_FORMAT = (("address", 8, 8), ("ip", 16, 8), ("error_code", 24, 8))
FAULT_EVENTS = ("exceptions/page_fault_user", "exceptions/page_fault_kernel")


def cache_root() -> Path:
    return Path(os.environ.get("KVDS_BPF_OBJECTS", DEFAULT_ROOT))


def kernel_key() -> str:
    u = os.uname()
    return hashlib.sha256(f"{u.release} {u.version} {u.machine}".encode()).hexdigest()[:16]


def object_key(source: Path = SOURCE) -> str:
    h = hashlib.sha256(source.read_bytes())
    for header in sorted(HEADERS.glob("*.h")):  # kvds's own headers (kvds_helpers.h): an edit rebuilds
        h.update(header.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    h.update(kernel_key().encode())
    return h.hexdigest()[:20]


def object_path(source: Path = SOURCE) -> Path:
    return cache_root() / f"{source.name.removesuffix('.c')}-{object_key(source)}.o"


def toolchain_status() -> tuple[bool, str]:
    """(can compile, reason): clang, bpftool, libbpf-dev headers and the kernel's BTF."""
    missing = [name for name in ("clang", "bpftool") if shutil.which(name) is None
               and not Path(f"/usr/sbin/{name}").exists()]
    if missing:
        return False, f"{' and '.join(missing)} not installed (Debian packages clang, bpftool)"
    if not BPF_HEADERS.is_file():
        return False, f"{BPF_HEADERS} missing (Debian package libbpf-dev)"
    if not VMLINUX_BTF.is_file():
        return False, f"{VMLINUX_BTF} missing (kernel built without CONFIG_DEBUG_INFO_BTF)"
    return True, "clang, bpftool, libbpf-dev and kernel BTF present"


def status() -> tuple[bool, str]:
    """(an object is ready or can be built, reason) without compiling anything."""
    if not SOURCE.is_file():
        return False, f"{SOURCE} missing from this installation"
    path = object_path()
    if path.is_file():
        return True, f"compiled object cached at {path}"
    ok, reason = toolchain_status()
    return (True, f"not compiled yet, will compile on first use ({reason})") if ok else (False, reason)


def _tool(name: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    if found is None:
        raise Unavailable(f"{name} not installed")
    return found


def commands(source: Path, obj: Path, include_dir: Path, vmlinux_h: Path, *, bpftool: str = "bpftool",
             clang: str = "clang") -> list[dict[str, Any]]:
    """The commands that build `obj` from `source`, as {"argv", "stdout" (a file, or absent)}: bpftool dumps the
    kernel's BTF as C into vmlinux_h (include_dir/vmlinux.h links to it), then clang compiles for the BPF target."""
    return [{"argv": [bpftool, "btf", "dump", "file", str(VMLINUX_BTF), "format", "c"], "stdout": str(vmlinux_h)},
            {"argv": [clang, *CFLAGS, "-I", str(include_dir), "-I", str(HEADERS), "-c", str(source), "-o", str(obj)]}]


def shell_line(cmd: dict[str, Any]) -> str:
    """A command as one shell line, for printing ("$ argv > stdout")."""
    return "$ " + shlex.join(cmd["argv"]) + (f" > {shlex.quote(cmd['stdout'])}" if cmd.get("stdout") else "")


def argv_path(obj: Path) -> Path:
    return obj.with_name(obj.name + ".argv.json")


def built_by(source: Path = SOURCE) -> list[dict[str, Any]] | None:
    """The commands that built the cached object of `source` (None when not built, or built before they were
    kept)."""
    try:
        return json.loads(argv_path(object_path(source)).read_text())
    except (OSError, ValueError):
        return None


def _run(cmd: list[str], what: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=stdout is subprocess.PIPE)
    if proc.returncode != 0:
        err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
        tail = " | ".join(line for line in err.strip().splitlines()[-4:])
        raise Unavailable(f"{what} failed (exit {proc.returncode}): {tail}")
    return proc


def vmlinux_header_path() -> Path:
    return cache_root() / f"vmlinux-{kernel_key()}.h"


def vmlinux_header(dump: list[str] | None = None) -> Path:
    """vmlinux.h of the running kernel, dumped once per kernel build by bpftool (`dump`: its argv)."""
    path = vmlinux_header_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vmlinux-", suffix=".h")
    try:
        with os.fdopen(fd, "wb") as out:
            _run(dump or [_tool("bpftool"), "btf", "dump", "file", str(VMLINUX_BTF), "format", "c"],
                 "bpftool btf dump", stdout=out)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def build(source: Path = SOURCE, force: bool = False) -> tuple[Path, float]:
    """(path of the compiled object, seconds spent compiling: 0.0 when it was cached)."""
    path = object_path(source)
    if path.is_file() and not force:
        return path, 0.0
    ok, reason = toolchain_status()
    if not ok:
        raise Unavailable(reason)
    t0 = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    incdir = Path(tempfile.mkdtemp(dir=path.parent, prefix=".inc-"))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".obj-", suffix=".o")
    os.close(fd)
    try:
        dump, compile_ = commands(source, Path(tmp), incdir, vmlinux_header_path(), bpftool=_tool("bpftool"),
                                  clang=_tool("clang"))
        header = vmlinux_header(dump["argv"])
        (incdir / "vmlinux.h").symlink_to(header)
        _run(compile_["argv"], f"clang {source.name}")
        compile_["argv"][-1] = str(path)  # the temporary output is renamed into place below
        argv_path(path).write_text(json.dumps([dump, compile_]))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old state or the whole object
    finally:
        shutil.rmtree(incdir, ignore_errors=True)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path, time.perf_counter() - t0


def check_fault_format(tracefs: Path) -> str | None:
    """None when the page-fault records match kvds.bpf.c's declaration, else the mismatch."""
    for event in FAULT_EVENTS:
        fmt = tracefs / "events" / event / "format"
        try:
            text = fmt.read_text()
        except OSError as exc:
            return f"cannot read {fmt}: {exc.strerror}"
        for field, offset, size in FAULT_FORMAT:
            if not re.search(rf"field:[^;]*\b{field};\s*offset:{offset};\s*size:{size};", text):
                return f"{event}: field {field} is not at offset {offset} size {size} (kvds.bpf.c declares it so)"
    return None


def main(argv: list[str] | None = None) -> int:
    """`python -m ebpf.objects [--force]`: compile (or find) every object; used by provision-bpf-objects.sh."""
    p = argparse.ArgumentParser(prog="python -m ebpf.objects", description=__doc__.splitlines()[0])
    p.add_argument("--force", action="store_true", help="recompile even when cached")
    p.add_argument("--quiet", action="store_true", help="print nothing when the object is already cached")
    p.add_argument("--dry-run", action="store_true", help="print the commands that would build it; run nothing")
    args = p.parse_args(argv)
    if args.dry_run:
        for source in SOURCES:
            for cmd in commands(source, object_path(source), Path(tempfile.gettempdir()) / "kvds-bpf-include",
                                vmlinux_header_path()):
                print(shell_line(cmd))
        return 0
    for source in SOURCES:
        try:
            path, secs = build(source, force=args.force)
        except Unavailable as exc:
            print(f"kvds bpf objects: {exc}", file=sys.stderr)
            return 3
        if secs or not args.quiet:
            print(f"kvds bpf objects: {path} ({'compiled in %.2f s' % secs if secs else 'cached'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
