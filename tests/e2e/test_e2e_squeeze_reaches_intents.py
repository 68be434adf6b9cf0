"""The squeeze's reclaim meets the registered intents: in the guest lab kernel (the mm_intent series), an arena set up
by e2e's own squeeze (e2e.stack.squeeze) and registered by e2e's own Registration is read back through its limit,
and the kernel's look-up counter moves over the repetition. Reclaim for a memory group consults a mapping (its young
bits, and the series' registry) only when the address space's owner is in the group; the squeeze once moved kvds
out after faulting the arena, and the counter stayed 0 while reclaim took 40,000 of its pages."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from harness import doctor

GUEST_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    import numpy as np
    from harness import knobs
    from harness.intent import IntentClass
    from harness.mapping import load_mapping
    from kernel_vm import swap_backend
    from e2e.intents import CLASS_CODES
    from e2e.mm_register import Registration
    from e2e.stack import Sizes, squeeze

    slot, slots = 64 << 10, 256                             # a 16 MiB arena, squeezed by a quarter
    swap_backend.set_up("zram", 64 << 20)
    main = knobs.create_cgroup("e2e-main", ("memory",))
    main.add_pid(os.getpid())
    sq = squeeze("e2e-r1", Sizes(slot, slots, 0, 0, slots // 4 * slot), main)
    reg = Registration(load_mapping("stack"), sq.arena.address, slot, slots)
    codes = np.repeat([CLASS_CODES[IntentClass.DECODE_CRITICAL], CLASS_CODES[IntentClass.COLD_SPILLABLE]],
                      slots // 2).astype(np.uint8)
    reg.apply(np.arange(slots), codes)
    during = Path("/proc/self/cgroup").read_text().strip()
    for _ in range(3):                                      # what reclaim took comes back, charged at the limit
        for b in range(slots):
            sq.arena.read(b, slot)
    out = reg.close()
    sq.end()
    out["cgroup_during"], out["cgroup_after"] = during, Path("/proc/self/cgroup").read_text().strip()
    Path(sys.argv[1]).write_text(json.dumps(out))
""")


@doctor.skip_unless("qemu.guest")
@pytest.mark.timeout(900)
def test_squeeze_reclaim_looks_up_the_registered_intents(tmp_path: Path) -> None:
    from harness import tracks
    from harness.remote.guest import GUEST_CPU, GUEST_KERNEL_ENV, GUEST_SETUP, GUEST_STATE_DIR, guest_lab_status

    ready, why = guest_lab_status("io")  # the lab kernel `kvds e2e --target guest` boots
    if not ready:
        pytest.skip(why)
    lab = tracks.guest_lab()
    kernel = os.environ.get(GUEST_KERNEL_ENV, "").strip() or lab.lab_kernel("io")[1].id
    script, out = tmp_path / "squeeze.py", tmp_path / "out.json"
    script.write_text(GUEST_SCRIPT)
    res = lab.boot_and_run(kernel, ["sh", "-c", GUEST_SETUP + f"cd {Path.cwd()} && KVDS_STATE_DIR={GUEST_STATE_DIR} "
                                                f"{sys.executable} {script} {out}"], tmp_path,
                           host_root=True, timeout=840, memory_mb=1024, cpu=GUEST_CPU)
    assert res.status == 0 and not res.findings and not res.timed_out, res.failure
    got = json.loads(out.read_text())
    if got["reclaim_stats"] is None:
        pytest.skip("the guest kernel's mm_intent has no reclaim consumer (no stats file)")
    assert got["error"] is None and got["writes"] > 0 and got["left_after_clear"] == 0, got
    # kvds sits in the squeezed group while the repetition runs (knobs prefixes its groups' names)
    assert got["cgroup_during"].endswith("e2e-r1") and got["cgroup_after"].endswith("e2e-main"), got
    # reclaim consulted the registry for the arena's pages, and kept latency-critical ones because of it
    assert got["lookups"] > 0 and got["reclaim_stats"]["protected_pages"] > 0, json.dumps(got)
