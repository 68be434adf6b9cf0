"""The host-load meter (io_priority/host_load.py) on this real host: other work outside kvds's process tree is
counted as foreign CPU, kvds's own children are not. The burners run for a fixed CPU time (not wall time), so
the figures hold however busy the machine is."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from io_priority import host_load

CPU_S = 0.5
BURN = f"import time\nwhile time.process_time() < {CPU_S}: pass\n"


def test_own_children_are_not_foreign_and_an_orphaned_hog_is() -> None:
    own = host_load.LoadMeter()
    own.start()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # kvds's own child: reaped, counted as ours
    mine = own.stop()
    other = host_load.LoadMeter()
    other.start()
    # a grandchild orphaned at once: reparented away from this process, so its CPU time is someone else's
    pid = int(subprocess.run(["sh", "-c", f"{sys.executable} -c '{BURN}' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    theirs = other.stop()
    assert mine.own_cores * mine.seconds >= 0.9 * CPU_S        # the child's CPU is kvds's own ...
    assert theirs.own_cores * theirs.seconds < 0.5 * CPU_S     # ... the orphan's is not,
    assert theirs.foreign_cores * theirs.seconds >= 0.9 * CPU_S  # it is other work
    assert 0 <= mine.steal_share <= 1


def test_judged_note_names_quiet_busy_and_mixed() -> None:
    quiet = host_load.LoadSample(5.0, 0.01, 0.9, 0.0, 0.0, 0.2)
    busy = host_load.LoadSample(5.0, 1.2, 0.9, 0.0, 0.4, 3.6)
    assert "quiet host" in host_load.judged_note([quiet, quiet])
    assert host_load.judged_note([busy, busy]).startswith("not judged: host busy")
    assert "1 of 2 repetitions on a busy host" in host_load.judged_note([quiet, busy])
    assert busy.as_dict()["busy"] is True and quiet.as_dict()["busy"] is False
