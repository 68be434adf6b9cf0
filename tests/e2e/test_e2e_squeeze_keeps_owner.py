"""kvds stays in its squeezed memory group on this host, and that is what makes the group's reclaim see the replay's
references. Reclaim for a group counts a mapping's young bits (and mm_intent's registry) only when the address
space's owner is in the group; this host's sandbox withholds CAP_SYS_RESOURCE, so kvds cannot make itself
unkillable there and once moved out after faulting the arena. On cgroup v1 e2e's squeeze now switches the group's
OOM killer off and a guard process raises the limit when a fault waits (e2e/oom_guard.py). Both tests build e2e's
own squeeze (e2e.stack.squeeze) in a subprocess with its own journal, on real cgroups and zram swap; run under
/tmp/kvds-kernel.lock."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import doctor
from tests.conftest import REPO

pytestmark = [doctor.skip_unless("root"), doctor.skip_unless("memcg", "swap.zram")]

SET_UP = """
    import json, os, resource, sys
    from pathlib import Path
    from harness import knobs
    from kernel_vm import swap_backend
    from e2e.stack import Sizes, squeeze

    slot, slots = 16 << 10, 2048                            # a 32 MiB arena
    swap_backend.set_up("zram", 64 << 20)
    main = knobs.create_cgroup("e2e-main", ("memory",))
    main.add_pid(os.getpid())
    sq = squeeze("e2e-r1", Sizes(slot, slots, 0, 0, slot), main)
    during = Path("/proc/self/cgroup").read_text()

    def majflt():
        return resource.getrusage(resource.RUSAGE_SELF).ru_majflt

    def read(lo, hi):
        before = majflt()
        for b in range(lo, hi):
            sq.arena.read(b, slot)
        return majflt() - before
"""

HOT_AND_COLD = """
    hot = slots // 4                                        # the first quarter: faulted first, the oldest pages
    sq.memcg.set("memory", sq.limit_file, -1 if sq.limit_file == "memory.limit_in_bytes" else "max")
    read(0, slots)                                          # what the squeeze's limit took comes back
    Path("/proc/self/clear_refs").write_text("1")           # every page of kvds unreferenced (young bits cleared)
    read(0, hot)                                            # ... but the hot quarter's, read again
    sq.memcg.set("memory", sq.limit_file, slots * slot // 2)  # one reclaim of half the arena, oldest pages first
    out = {"hot_swap_ins": read(0, hot), "hot_pages": hot * slot // 4096, "cold_swap_ins": read(hot, slots)}
"""

OOM = """
    sq.memcg.set("memory", "memory.swappiness", 0)          # reclaim may not swap: nothing it can take
    block = bytearray(4 << 20)                              # 4 MiB the group has no room for
    for i in range(0, len(block), 4096):
        block[i] = 1
    out = {"touched": len(block)}
    del block                                               # room again for the tear-down's own charges
"""

END = """
    out.update(sq.end(), cgroup_during=during, cgroup_after=Path("/proc/self/cgroup").read_text())
    Path(sys.argv[1]).write_text(json.dumps(out))
"""


def _run(body: str, tmp_path: Path, env: dict[str, str]) -> dict:
    script, out = tmp_path / "squeeze.py", tmp_path / "out.json"
    script.write_text(textwrap.dedent(SET_UP) + textwrap.dedent(body) + textwrap.dedent(END))
    res = subprocess.run([sys.executable, str(script), str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def _in_squeezed_group(got: dict) -> bool:
    """kvds sat in the repetition's group during it and in its own after (knobs prefixes the groups' names)."""
    mem = [line for line in got["cgroup_during"].splitlines() if ":memory:" in line or line.startswith("0::")]
    after = [line for line in got["cgroup_after"].splitlines() if ":memory:" in line or line.startswith("0::")]
    return any(line.endswith("e2e-r1") for line in mem) and any(line.endswith("e2e-main") for line in after)


def test_reclaim_keeps_the_pages_the_owner_keeps_reading(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    got = _run(HOT_AND_COLD, tmp_path, kvds_env)
    assert _in_squeezed_group(got), got
    assert got["kept_by"] in ("oom_score_adj", "oom_guard"), got
    # the reclaim took half the arena: cold pages, which came back from swap
    assert got["cold_swap_ins"] >= got["hot_pages"], got
    # and left the hot quarter, whose young bits it saw. With kvds moved out of the group, as the squeeze did
    # before, reclaim is blind and takes the oldest pages first: the hot quarter (1,967 of 2,048 in three runs).
    # Seen, most of it stays: 0 / 92 / 0 / 350 in four runs (the kernel's aging varies), so the bound is half
    assert got["hot_swap_ins"] < got["hot_pages"] // 2, got


def test_a_charge_reclaim_cannot_meet_waits_and_is_counted(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    if subprocess.run(["sh", "-c", "echo -1000 > /proc/self/oom_score_adj"], capture_output=True).returncode == 0:
        pytest.skip("kvds can be made unkillable here: the squeeze keeps it in its group without the guard")
    got = _run(OOM, tmp_path, kvds_env)
    assert _in_squeezed_group(got), got
    # the group's OOM killer did not kill kvds: each fault it could not charge waited for the guard's raise
    assert got["kept_by"] == "oom_guard" and got["oom_waits"] > 0, got
    assert got["limit_raised_bytes"] == got["oom_waits"] * (16 << 10), got


SPILLS = """
    import numpy as np
    from kv_policy.replay.slot_io import SlotIO
    sq.end()                                                # e2e's own squeeze at its default: 10% of the arena
    slot, slots = 8 << 10, 2398
    sq = squeeze("e2e-r2", Sizes(slot, slots, 0, 0, slot * slots // 10), main)
    work = Path(os.environ["KVDS_WORK_DIR"])
    work.mkdir(parents=True, exist_ok=True)
    backing = knobs.create_file(work / "e2e-spills.img", slots * slot, fill=b"\\xa5")
    io = SlotIO(str(backing), slot)
    rng = np.random.default_rng(0)
    before = SlotIO.enomem_retries
    for b in rng.integers(slots, size=36000).tolist():      # synchronous spills of random slots, as a replay does
        if STAGED:
            io.write(sq.arena.slot(b, slot), b, None)
        else:                                               # the arena's own pages handed to O_DIRECT (pinned)
            io._io(os.pwritev, sq.arena.slot(b, slot), b * slot)
    out = {"enomem_retries": SlotIO.enomem_retries - before}
    sq.lift()
    io.close()
"""


def test_staged_transfers_never_fail_for_want_of_memory(tmp_path: Path, kvds_env: dict[str, str]) -> None:
    """kv_policy/replay/slot_io.py SlotIO stages every O_DIRECT transfer through a buffer of its own: the kernel pins
    that buffer, always resident, instead of arena pages the squeeze may have taken, so no transfer has to fault its
    buffer in against a full group and fail with ENOMEM. Handed the arena's own pages (what SlotIO did before), 36,000
    random spills from the arena squeezed 10% met 118-236 ENOMEM retries in 5 of 8 runs on this host and none in the
    other 3 (the group's reclaim varies run to run), so the old way is described here, not asserted."""
    got = _run("STAGED = True\n" + textwrap.dedent(SPILLS), tmp_path, kvds_env)
    assert got["kept_by"] in ("oom_score_adj", "oom_guard"), got
    assert got["enomem_retries"] == 0, got
