"""The block workload the eBPF tests count: O_DIRECT 4 KiB requests from threads with known I/O priorities, and
the check that a recording accounts for every one of them."""

from __future__ import annotations

import mmap
import os
import random

from harness.ioprio import parse_ioprio, set_ioprio

BLOCK = 4096
DEVICE_BYTES = 64 << 20


def block_numbers(write: bool, n: int, seed: int) -> list[int]:
    """n distinct random block numbers: reads in the device's first half, writes in its second, so a reader and
    a writer running together never have requests in flight on the same sector (the programs pair issue and
    complete by (device, sector); two requests on one key at once would leave one of them untimed)."""
    half = DEVICE_BYTES // BLOCK // 2
    return [(half if write else 0) + b for b in random.Random(seed).sample(range(half), n)]


def direct_io(dev: str, prio: str, write: bool, n: int, seed: int, errors: list[BaseException]) -> None:
    """n O_DIRECT 4 KiB requests at distinct random offsets, from a thread whose I/O priority is `prio`."""
    try:
        set_ioprio(parse_ioprio(prio))  # per thread: the block layer tags this thread's requests
        blocks = block_numbers(write, n, seed)
        buf = mmap.mmap(-1, BLOCK)
        buf.write(b"w" * BLOCK)
        fd = os.open(dev, (os.O_WRONLY if write else os.O_RDONLY) | os.O_DIRECT)
        try:
            for off in blocks:
                (os.pwritev if write else os.preadv)(fd, [buf], off * BLOCK)
        finally:
            os.close(fd)
    except BaseException as exc:  # surfaced by the test, not lost in the thread
        errors.append(exc)


def assert_accounted(res: dict, dev: str, cls: str, op: str, n: int) -> int:
    """The recording accounts for each of the n requests of class `cls` and op `op` on `dev` exactly once: timed
    (in the issue -> complete histogram), unfinished (issued, never seen completing) or untimed (completion seen
    without its issue); none overwritten or lost (the workload's reader and writer never share a sector). At most
    5% untimed or unfinished (what the kernel did not hand the programs). Returns how many were timed."""
    name = os.path.basename(dev)
    hist = res["blk"]["issue_to_complete"].get(name, {}).get(cls, {}).get(op, {"count": 0})
    acct = res["blk"]["accounting"][name][cls][op]
    assert acct["timed"] == hist["count"], (acct, hist["count"])
    assert acct["overwritten"] == acct["lost"] == 0, acct
    # With a task filter a request is tracked only if block_getrq marked it: a getrq run the kernel reports
    # skipping (missed_events, 0 so far) leaves one request out of every count.
    unmarked = res.get("missed_events", {}).get("block/block_getrq", 0)
    seen = acct["timed"] + acct["unfinished"] + acct["untimed"]
    assert n - unmarked <= seen <= n, (acct, n, res.get("missed_events"))
    assert acct["unfinished"] + acct["untimed"] <= 0.05 * n, (acct, n, res.get("missed_events"))
    return acct["timed"]
