"""The memory hog tenant: `python -m e2e.hog --mib N --pause-ms P`. Waits for "go" on stdin (so kvds can move it
into the experiment's memory cgroup before it allocates), faults N MiB of private anonymous memory, prints "ready",
then writes one byte of every page in a loop, sleeping P ms between passes, until SIGTERM; then prints its passes
as one JSON line."""
from __future__ import annotations

import argparse
import mmap
import signal
import sys
import time

from harness import results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="e2e.hog")
    p.add_argument("--mib", type=int, required=True)
    p.add_argument("--pause-ms", type=float, default=5.0)
    a = p.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    if sys.stdin.readline().strip() != "go":
        return 2
    n = a.mib << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    page = mmap.PAGESIZE
    passes, t0 = 0, time.monotonic()
    while not stop:
        for off in range(0, n, page):
            m[off] = (passes + off // page) & 0xFF  # a write: the page is dirty, reclaim must swap it out
        passes += 1
        if passes == 1:
            print("ready", flush=True)
        time.sleep(a.pause_ms / 1e3)
    secs = time.monotonic() - t0
    print(results.dumps({"passes": passes, "seconds": secs, "mib_per_s": passes * a.mib / secs if secs else 0.0},
                        indent=None), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
