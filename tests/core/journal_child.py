"""A kvds-like process that changes five kinds of kernel knob, one step at a time, for the crash tests.

It prints "STEP <n> <facts>" after each change and then sleeps, so the test can SIGKILL it after any step.
Run as: python -m tests.core.journal_child <scratch-dir> [--wait|--exit-normally|--raise]; SIGTERM is handled as the
`kvds` CLI handles it (harness/cli.py), so a terminated child restores itself and exits 143.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from harness import cli, journal, knobs

SYSFS_KNOB = "/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan"


def steps(scratch: Path):
    old = int(knobs.read_knob(SYSFS_KNOB))
    knobs.write_knob(SYSFS_KNOB, old + 7)
    yield f"sysfs {SYSFS_KNOB}"
    backing = knobs.create_file(scratch / "loop.img", 16 << 20, fill=b"kvds")
    dev = knobs.loop_attach(backing)
    knobs.set_scheduler(dev, "bfq")
    yield f"loop {dev}"
    mnt = knobs.create_dir(scratch / "mnt")
    knobs.mount("tmpfs", str(mnt), "kvds-journal-test")
    yield f"mount {mnt}"
    cg = knobs.create_cgroup("journaltest", ("memory",))
    limit = "memory.limit_in_bytes" if cg.version("memory") == 1 else "memory.max"
    cg.set("memory", limit, 64 << 20)
    yield f"cgroup {cg.path('memory')}"
    z = knobs.zram_swap(32 << 20)
    yield f"zram {z}"


def main() -> None:
    scratch = Path(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "--wait"
    signal.signal(signal.SIGTERM, cli._on_sigterm)  # what `kvds` does: SIGTERM unwinds, the journal restores
    try:
        with journal.session():
            for i, facts in enumerate(steps(scratch), 1):
                print(f"STEP {i} {facts}", flush=True)
                if mode == "--wait":
                    time.sleep(0.05)
            if mode == "--raise":
                raise RuntimeError("deliberate failure after every change")
            if mode == "--wait":
                print("ALL", flush=True)
                time.sleep(3600)
    except KeyboardInterrupt:
        sys.exit(130)  # the CLI's statuses for SIGINT and SIGTERM, after the session restored every knob
    except cli._Terminated:
        sys.exit(143)


if __name__ == "__main__":
    main()
