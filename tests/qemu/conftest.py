"""Fixtures the QEMU track's test files share."""

from __future__ import annotations

import pytest


@pytest.fixture
def kernel(debug_kernel):
    """The default debug guest kernel (tests/conftest.py builds it once per session)."""
    return debug_kernel
