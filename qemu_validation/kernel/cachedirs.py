"""Where the QEMU track keeps kernel sources, builds, ccache and guest binaries: outside the checkout.

Everything lives under harness.paths.cache_dir() so a fresh clone reuses kernels built by an earlier one.
"""

from __future__ import annotations

from pathlib import Path

from harness.paths import cache_dir


def root() -> Path:
    return cache_dir() / "qemu"


def sources() -> Path:
    return root() / "sources"


def builds() -> Path:
    return root() / "builds"


def workspaces() -> Path:
    """Object trees, one per kernel configuration (multi-GB each; `kvds qemu build --prune` frees old ones)."""
    return root() / "workspaces"


def ccache() -> Path:
    return root() / "ccache"


def guest_bin() -> Path:
    return root() / "guest-bin"
