"""The block workload the eBPF tests count: O_DIRECT 4 KiB requests from threads with known I/O priorities."""

from __future__ import annotations

import mmap
import os
import random

from harness.ioprio import parse_ioprio, set_ioprio

BLOCK = 4096
DEVICE_BYTES = 64 << 20


def direct_io(dev: str, prio: str, write: bool, n: int, seed: int, errors: list[BaseException]) -> None:
    """n O_DIRECT 4 KiB requests at distinct random offsets, from a thread whose I/O priority is `prio`."""
    try:
        set_ioprio(parse_ioprio(prio))  # per thread: the block layer tags this thread's requests
        offsets = random.Random(seed).sample(range(DEVICE_BYTES // BLOCK), n)
        buf = mmap.mmap(-1, BLOCK)
        buf.write(b"w" * BLOCK)
        fd = os.open(dev, (os.O_WRONLY if write else os.O_RDONLY) | os.O_DIRECT)
        try:
            for off in offsets:
                (os.pwritev if write else os.preadv)(fd, [buf], off * BLOCK)
        finally:
            os.close(fd)
    except BaseException as exc:  # surfaced by the test, not lost in the thread
        errors.append(exc)
