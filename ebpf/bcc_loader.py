"""Finding bcc and the kernel headers it compiles against (provisioned by harness/setup/provision-bcc-headers.sh).

Debian's bcc looks for /lib/modules/$(uname -r)/build, which a custom kernel does not have; BCC_KERNEL_SOURCE
must name a tree before the first BPF() call. Any 6.12 tree compiles our programs: they read only tracepoint
arguments, whose layouts bcc takes from tracefs on the running kernel, never kernel structs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from harness.errors import Unavailable

DEFAULT_HEADERS_ROOT = "/var/cache/kvds/bcc-headers"
PROVISION_SCRIPT = "harness/setup/provision-bcc-headers.sh"


def headers_tree() -> Path:
    """The provisioned header tree (KVDS_BCC_HEADERS overrides the cache root, as in the script)."""
    return Path(os.environ.get("KVDS_BCC_HEADERS", DEFAULT_HEADERS_ROOT)) / "tree"


def headers_status() -> tuple[bool, str]:
    """(usable, reason) for the header tree bcc needs on this host."""
    explicit = os.environ.get("BCC_KERNEL_SOURCE")
    if explicit:
        ok = (Path(explicit) / "include").is_dir()
        return ok, f"BCC_KERNEL_SOURCE={explicit}" + ("" if ok else " has no include/")
    build = Path(f"/lib/modules/{os.uname().release}/build")
    if (build / "include").is_dir():
        return True, f"headers of the running kernel at {build}"
    tree = headers_tree()
    stamp = tree / ".kvds-provisioned"
    if stamp.is_file():
        return True, f"Debian {stamp.read_text().strip()} headers at {tree}"
    return False, f"no kernel headers for bcc: run {PROVISION_SCRIPT} (or harness/setup/setup.sh)"


_bcc: Any = None
import_seconds: float | None = None


def load_bcc() -> Any:
    """The bcc module, with BCC_KERNEL_SOURCE pointed at usable headers; raises Unavailable with the reason."""
    global _bcc, import_seconds
    if _bcc is not None:
        return _bcc
    ok, reason = headers_status()
    if not ok:
        raise Unavailable(reason)
    if "BCC_KERNEL_SOURCE" not in os.environ and not Path(f"/lib/modules/{os.uname().release}/build").is_dir():
        os.environ["BCC_KERNEL_SOURCE"] = str(headers_tree())
    t0 = time.perf_counter()
    try:
        import bcc  # Debian's python3-bpfcc, exposed to the venv by setup.sh's .pth file
    except ImportError as exc:
        raise Unavailable(f"bcc is not importable ({exc}); install python3-bpfcc and rerun harness/setup/setup.sh") from None
    import_seconds = time.perf_counter() - t0
    _bcc = bcc
    return bcc
