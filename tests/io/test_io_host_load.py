"""The host-load meter (io_priority/host_load.py) on this real host: other work outside kvds's process tree is
counted as foreign CPU, kvds's own children are not."""

from __future__ import annotations

import subprocess
import sys
import time

from io_priority import host_load

BURN = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.5: pass\n"


def test_own_children_are_not_foreign_and_an_orphaned_hog_is() -> None:
    own = host_load.LoadMeter()
    own.start()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # kvds's own child: reaped, counted as ours
    mine = own.stop()
    other = host_load.LoadMeter()
    other.start()
    # a grandchild orphaned at once: reparented away from this process, so its CPU time is someone else's
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{BURN}' >/dev/null 2>&1 &"], check=True)
    time.sleep(1.6)
    theirs = other.stop()
    assert mine.own_cores > 0.25      # the child's CPU is kvds's own ...
    assert theirs.own_cores < 0.25    # ... the orphan's is not,
    assert theirs.foreign_cores > 0.25 and theirs.busy  # it is other work, above the limit
    assert 0 <= mine.steal_share <= 1 and mine.seconds > 1


def test_judged_note_names_quiet_busy_and_mixed() -> None:
    quiet = host_load.LoadSample(5.0, 0.01, 0.9, 0.0, 0.0, 0.2)
    busy = host_load.LoadSample(5.0, 1.2, 0.9, 0.0, 0.4, 3.6)
    assert "quiet host" in host_load.judged_note([quiet, quiet])
    assert host_load.judged_note([busy, busy]).startswith("not judged: host busy")
    assert "1 of 2 repetitions on a busy host" in host_load.judged_note([quiet, busy])
    assert busy.as_dict()["busy"] is True and quiet.as_dict()["busy"] is False
