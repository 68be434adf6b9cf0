"""What the I/O track's test files share."""

from __future__ import annotations

from io_priority import device

SMALL = device.Layout(32 << 20, 64 << 20)  # a loop-device layout small enough for a test: 32 MiB fast, 64 MiB slow
