"""`kvds e2e --target guest`: the four cells in the io lab kernel (6.12 with the mm_intent series, loop, zram and
blkio throttling; KVDS_GUEST_KERNEL overrides it), where the
intent cells also register their slots' classes with mm_intent, re-registered as classes change and cleared at the
end of every repetition (none left), while the no-intent cells register nothing; the run is filed home tagged by
host. Slow: a guest boot under TCG, minutes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import doctor
from tests.conftest import needs_root, run_kvds

TINY = ["--steps", "20", "--reps", "1", "--block-kib", "16", "--work-dir", "/tmp", "--spill-region", "32M",
        "--hog-mib", "16"]


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow  # a guest boot and four cell repetitions under TCG
@pytest.mark.timeout(1860)
def test_guest_cells_register_their_classes_with_mm_intent(kvds_env: dict[str, str]) -> None:
    from harness.remote.guest import guest_lab_status

    ready, why = guest_lab_status("io")  # the lab kernel e2e's parser names (loop, zram, mm_intent)
    if not ready:
        pytest.skip(why)
    res = run_kvds(["e2e", "--target", "guest", *TINY, "--json"], kvds_env, timeout=1800)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    guest = json.loads(res.stdout)["summary"]["hosts"]["guest"]
    assert guest["status"] == "ok" and len(guest["runs"]) == 1 and guest["runs"][0].endswith("--guest")
    assert "-e2e-guest-" in guest["runs"][0]  # the guest's host name (harness/remote/guest.py), not "(none)"
    run = Path(kvds_env["KVDS_RESULTS_DIR"]) / guest["runs"][0]
    s = json.loads((run / "summary.json").read_text())
    names = ["LRU / no intents", "LRU / intents", "ExpectedNextUse / no intents", "ExpectedNextUse / intents"]
    assert sorted(s["cells"]) == sorted(names)  # summary.json stores its keys sorted
    assert [n for _, n in s["order"]] == names  # one repetition each, in the design's order, the reference first
    if s["setup"]["mm_intent"] != "registered in the intent cells":
        pytest.skip(f"the guest kernel booted has no mm_intent registry: {s['setup']['mm_intent']}")
    for c in s["cells"].values():
        mm = c["mm_intent"]
        if not c["intents"]:
            assert mm is None
            continue
        assert not mm["errors"] and mm["updates_per_rep"] > 0 and mm["ranges_max"] > 0, mm
        assert mm["left_after_clear"] == 0
        # the squeeze acts while the intents are registered: reclaim consulted the registry
        assert all(n and n > 0 for n in mm["lookups_per_rep"]), mm
        assert c["tpot_p99_us"]["value"] > 0 and c["calibrated_sim_tpot_p99_us"] > 0
