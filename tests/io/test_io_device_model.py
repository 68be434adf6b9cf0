"""Device models (io_priority/device_model.py): a null_blk device whose service time kvds sets.

Host side (make test): the models' null_blk settings, bad input refused with one line, the dry run naming the
device it would create, and on this host (no CONFIG_BLK_DEV_NULL_BLK) the doctor-style refusal with exit 3.
Guest side (the io lab kernel, configs/io.config + kernel_patches/io_model): the knob creates a real null_blk
device whose reads take at least the model's latency plus their transfer and restore removes it; under
icount-warp a 4 s host stall of QEMU is in no read latency the guest measures, closed or open loop, while under
icount with sleep=on the open-loop reader sees it (the I/O twin of tests/qemu/test_qemu_guest.py's icount test).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from io_priority import device_model, ioload_launch
from tests.conftest import REPO, run_kvds, stall_qemu_when_told

MiB = 1 << 20


def test_every_model_states_its_source_and_maps_onto_null_blk_settings() -> None:
    for m in device_model.MODELS.values():
        s = m.nullb_settings(768 * MiB)
        assert s["size"] == 768 and s["irqmode"] == 2 and s["queue_mode"] == 2 and s["memory_backed"] == 0
        assert s["completion_nsec"] == int(round(m.completion_us * 1000)) and s["service_mbps"] == m.mbps
        assert "mbps" not in s  # null_blk's token bucket is not the model's bandwidth
        assert s["hw_queue_depth"] == m.queue_depth and s["submit_queues"] == m.submit_queues
        assert len(m.source) > 40  # where the numbers come from, in words
    assert device_model.MODELS["sata-ssd"].nullb_settings(MiB + 1)["size"] == 2  # whole MiB, rounded up


@pytest.mark.parametrize("argv, needle", [
    (["io", "bench", "--device-model", "floppy"], "unknown device model 'floppy'"),
    (["io", "bench", "--device", "/dev/null", "--device-model", "sata-ssd", "--dry-run"], "name two devices"),
])
def test_bad_device_model_input_is_one_line_and_exit_2(kvds_env: dict[str, str], argv: list[str],
                                                       needle: str) -> None:
    res = run_kvds(argv, kvds_env, timeout=120)
    assert res.returncode == 2, res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_dry_run_names_the_null_blk_device_it_would_create(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["io", "bench", "--device-model", "sata-ssd", "--dry-run", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["summary"]
    text = json.dumps(plan)
    assert "completion_nsec=77000" in text and "hw_queue_depth=32" in text and "service_mbps=530" in text


def test_host_without_null_blk_refuses_with_the_reason(kvds_env: dict[str, str]) -> None:
    if Path("/sys/module/null_blk").exists():
        pytest.skip("this host has null_blk: the guest tests below cover the device")  # not this kind of machine
    res = run_kvds(["io", "bench", "--device-model", "sata-ssd", "--reps", "3", "--duration", "1"], kvds_env,
                   timeout=300)
    assert res.returncode == 3, (res.returncode, res.stderr)
    assert "null_blk" in res.stderr and "Traceback" not in res.stderr


# ---- guest lab: the io lab kernel (null_blk built in) -------------------------------------------------------

GUEST_SCRIPT = r"""
import json, os, subprocess, sys, time
os.environ["KVDS_STATE_DIR"] = "/tmp/kvds-state"  # the host's root is read-only in the guest
from pathlib import Path
from harness import journal
from harness.knobs.nullblk import create_nullb
from io_priority import device_model

share, ioload, rate = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
m = device_model.model("sata-ssd")
with journal.scoped() as j:
    dev = create_nullb("kvds-test", m.nullb_settings(64 << 20))
    (share / "dev").write_text(dev)
    def phase(name):
        subprocess.run([ioload, "reader", "--dev", dev, "--bs", "4096", "--off", "0", "--len", str(64 << 20),
                        "--rate", rate, "--duration-ms", "1500" if rate == "0" else "3000",
                        "--out", str(share / f"{name}.bin")], check=True,
                       input=f"go {time.monotonic_ns()}\n", text=True, stdout=subprocess.DEVNULL)  # ioload's start protocol
    t0 = time.monotonic(); phase("before"); t1 = time.monotonic()
    (share / "go").write_text("go")  # the host stops QEMU for 4 s as soon as it sees this, while the phase reads
    phase("during"); t2 = time.monotonic()
    (share / "done").write_text("done")
(share / "after.json").write_text(json.dumps({"exists": Path(dev).exists(), "items":
    [p.name for p in Path("/sys/kernel/config/nullb").iterdir()] if Path("/sys/kernel/config/nullb").exists() else [],
    "t": [t0, t1, t2]}))
"""


@pytest.fixture(scope="module")
def io_lab():
    from qemu_validation import guest_target
    from qemu_validation.kernel import build

    spec, built, _ = guest_target.lab_kernel("io")
    return built if built is not None else build.ensure_built(spec.spec)


@pytest.mark.slow  # boots of the io lab kernel, which make test does not build (make test-slow)
@pytest.mark.parametrize("clock, loop", [("icount-warp", "closed"), ("icount-warp", "open"), ("icount", "open")])
def test_model_device_reads_take_its_service_time_and_a_host_stall_is_not_in_them(io_lab, tmp_path: Path,
                                                                                  clock: str, loop: str) -> None:
    """Under icount-warp a 4 s SIGSTOP of QEMU in the middle of a read phase is in no read, closed loop (the vCPU
    busy) or open loop at 200 reads/s (the vCPU idle between reads, its wake-ups on guest timers). Under icount
    with sleep=on, idle guest time passes in real time, so the open-loop reader does see the stall: the reason
    the device-model runs use icount-warp, and proof that this test can fail."""
    from qemu_validation.boot import guest_command

    share, log_dir = tmp_path / "share", tmp_path / "log"
    share.mkdir()
    script = share / "guest.py"  # under host_root the share is at its own path in the guest
    script.write_text(GUEST_SCRIPT)
    stall_s = 4.0
    seen: list[str] = []
    thread, stalled = stall_qemu_when_told(log_dir, share, stall_s, seen)
    rate = "0" if loop == "closed" else "200"
    res = guest_command.boot_and_run(io_lab.id, [sys.executable, str(script), str(share),
                                                 str(ioload_launch.build()), rate],
                                     share, timeout=900, log_dir=log_dir, icount_shift=0,
                                     icount_warp=clock == "icount-warp", host_root=True, cpus=2, cwd=str(REPO))
    thread.join(timeout=60)
    assert res.ok, res.failure
    assert len(stalled) == 1  # the host really stopped this guest's QEMU
    assert "go" in seen and "done" not in seen  # ... while the second phase was reading
    after = json.loads((share / "after.json").read_text())
    assert not after["exists"] and after["items"] == []  # restore powered the device off and removed it
    before = np.fromfile(share / "before.bin", dtype=np.int64)
    during = np.fromfile(share / "during.bin", dtype=np.int64)
    assert before.size > 100 and during.size > 100
    m = device_model.model("sata-ssd")
    service_ns = m.completion_us * 1000 + 4096 * 1000 / m.mbps  # the latency after a 4 KiB transfer
    assert before.min() >= service_ns and during.min() >= service_ns  # the model's service time is in every read
    if clock == "icount-warp":
        assert during.max() < stall_s * 1e9 / 4  # the 4 s stall is in no read (guest time is instructions)
    else:
        assert during.max() >= stall_s * 1e9 / 4  # sleep=on: the idle reader's guest time ran on through the stall


def test_io_model_patch_applies_to_the_lab_source_and_is_checkpatch_clean(tmp_path: Path) -> None:
    """kernel_patches/io_model (null_blk's service_mbps) as a kernel developer checks it: `git am` after mm_intent
    onto the files they touch from Debian's 6.12 (the io lab's source), checkpatch --strict clean."""
    from qemu_validation.kernel import build, series_check

    tarball = series_check.SOURCES["debian-6.12"]
    if not tarball.is_file():
        pytest.skip(f"debian-6.12 source tarball {tarball} is not on this machine")
    io_model = sorted(build.series_dir("io_model").glob("*.patch"))
    series = sorted(build.series_dir("mm_intent").glob("*.patch")) + io_model
    tree, subjects = series_check.git_am(tarball, series, tmp_path)
    assert subjects[-1].startswith("null_blk: add service_mbps")
    main = (tree / "drivers/block/null_blk/main.c").read_text()
    assert "NULLB_DEVICE_ATTR(service_mbps, uint, NULL);" in main and "null_transfer_wait" in main
    assert series_check.checkpatch(tree, io_model) == ""
