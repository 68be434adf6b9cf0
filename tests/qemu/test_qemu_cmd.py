"""QEMU command construction and exit-status decoding (pure; no QEMU started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qemu_validation.boot import qemu_cmd


def _m(**kw) -> qemu_cmd.Machine:
    return qemu_cmd.Machine(kernel=Path("/k/bzImage"), initramfs=Path("/k/i.cpio"), console_log=Path("/k/c.log"), **kw)


def test_tcg_machine() -> None:
    argv = qemu_cmd.command(_m())
    joined = " ".join(argv)
    assert argv[:5] == ["qemu-system-x86_64", "-machine", "q35", "-accel", "tcg"]
    assert "-cpu" not in argv          # default model: no LA57, TASK_SIZE_MAX stays 4-level
    assert "isa-debug-exit,iobase=0xf4,iosize=0x04" in joined
    assert "-no-reboot" in argv and "-nodefaults" in argv
    assert "file:/k/c.log" in argv
    append = argv[argv.index("-append") + 1]
    assert "console=ttyS0" in append and "panic=-1" in append and "rcu_cpu_stall_timeout=300" in append
    assert "no_timer_check" in append.split()   # a starved TCG vCPU must not fail the IO-APIC timer check
    assert "-virtfs" not in argv


def test_share_and_host_root() -> None:
    argv = qemu_cmd.command(_m(share_dir=Path("/a,b"), host_root=True, extra_append=("lockdep_stuff=1",)))
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert shares[0].startswith("local,path=/a,,b,mount_tag=kvdsshare")
    assert "readonly=on" in shares[1] and "path=/," in shares[1]
    assert argv[argv.index("-append") + 1].endswith("lockdep_stuff=1")


def test_kvm_uses_host_cpu() -> None:
    argv = qemu_cmd.command(_m(accel="kvm"))
    assert argv[argv.index("-cpu") + 1] == "host"
    with pytest.raises(ValueError):
        qemu_cmd.command(_m(accel="hvf"))


@pytest.mark.parametrize("qemu_status,guest", [(1, 0), (3, 1), (33, 16), (255, 127), (0, None), (2, None), (-9, None)])
def test_decode_exit(qemu_status: int, guest: int | None) -> None:
    assert qemu_cmd.decode_exit(qemu_status) == guest


def test_port_value_saturates() -> None:
    assert [qemu_cmd.port_value(s) for s in (0, 5, 127, 128, 255)] == [0, 5, 127, 127, 127]


def test_new_qemu_flags_refuse_bad_input() -> None:
    """One line, exit 2, before anything boots: validate's counts and seed, exit-bench's iterations."""
    import subprocess
    import sys
    for argv in (["validate", "--concurrent", "-1"], ["validate", "--valid", "x"], ["validate", "--seed", "0"],
                 ["exit-bench", "--iterations", "5"], ["exit-bench", "--iterations", "0"],
                 ["run", "--icount", "11", "--", "true"], ["run", "--icount", "-1", "--", "true"]):
        p = subprocess.run([sys.executable, "-m", "harness.cli", "qemu", *argv], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2, (argv, p.stderr)
        assert p.stderr.startswith("kvds: error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_tcg_guest_is_told_the_host_tsc_rate() -> None:
    """A guest calibrating its TSC on a loaded host got it 3x wrong; under TCG it is told the host's rate."""
    info = "cpu MHz\t\t: 2596.128\nflags\t\t: fpu tsc constant_tsc nonstop_tsc tsc_known_freq\n"
    assert qemu_cmd.host_tsc_khz(info) == 2596128
    assert qemu_cmd.host_tsc_khz(info.replace(" tsc_known_freq", "")) is None
    assert qemu_cmd.host_tsc_khz("flags: constant_tsc nonstop_tsc tsc_known_freq\ncpu MHz : ?\n") is None
    tcg = qemu_cmd.command(_m(tsc_khz=2596128))
    assert "tsc_early_khz=2596128" in tcg[tcg.index("-append") + 1].split()
    kvm = qemu_cmd.command(_m(accel="kvm", tsc_khz=2596128))
    assert "tsc_early_khz" not in kvm[kvm.index("-append") + 1]
    plain = qemu_cmd.command(_m())
    assert "tsc_early_khz" not in plain[plain.index("-append") + 1]


def test_icount_clock() -> None:
    """Instruction-count time: `-icount shift=N` with the guest told its TSC is the 1 GHz virtual clock (not the
    host's rate), only under TCG and only for shifts QEMU accepts."""
    argv = qemu_cmd.command(_m(icount_shift=0, tsc_khz=2596128))
    assert argv[argv.index("-icount") + 1] == "shift=0,align=off,sleep=on"
    append = argv[argv.index("-append") + 1].split()
    assert "tsc_early_khz=1000000" in append and "tsc_early_khz=2596128" not in append
    assert "-icount" not in qemu_cmd.command(_m(tsc_khz=2596128))
    warp = qemu_cmd.command(_m(icount_shift=0, icount_warp=True))
    assert warp[warp.index("-icount") + 1] == "shift=0,align=off,sleep=off"  # idle time jumps to the next timer
    assert qemu_cmd.command(_m(icount_shift=3))[qemu_cmd.command(_m(icount_shift=3)).index("-icount") + 1].startswith(
        "shift=3,")
    for bad in (_m(accel="kvm", icount_shift=0), _m(icount_shift=11), _m(icount_shift=-1)):
        with pytest.raises(ValueError):
            qemu_cmd.command(bad)
