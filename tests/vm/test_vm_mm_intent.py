"""The VM arena registers its blocks with mm_intent: the register lines it builds from a layout and a mapping, and
(in the guest lab kernel, which carries the series) that the kernel's dump lists exactly those lines for the arena
process, and none once the repetition cleared them."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness import doctor
from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import load_mapping
from kernel_vm import mm_intent
from kernel_vm.mix import CLASSES, Layout, make_layout, parse_mix
from qemu_validation import mm_intent_client as mic

P = mic.PAGE_SIZE
BASE = 0x7F0000000000


def _layout(*classes: IntentClass, pages_per_block: int = 2) -> Layout:
    return Layout(pages_per_block * P, P, np.array([CLASSES.index(c) for c in classes], dtype=np.uint8))


def test_register_lines_follow_the_mapping_coalesced() -> None:
    dc, warm, cold, rc, done = (IntentClass.DECODE_CRITICAL, IntentClass.WARM, IntentClass.COLD_SPILLABLE,
                                IntentClass.RECOMPUTE_OK, IntentClass.DONE)
    lay = _layout(dc, dc, warm, dc, cold, cold, done, rc, dc)
    b = lay.block_bytes
    lines = [e.line() for e in mm_intent.plan(load_mapping("mm-intent"), lay, 42, BASE)]
    assert lines == [
        f"42 {BASE:#x} {2 * b:#x} 0x1 0 255\n",            # blocks 0-1: one range
        f"42 {BASE + 3 * b:#x} {b:#x} 0x1 0 255\n",        # not merged across the unregistered warm block 2
        f"42 {BASE + 4 * b:#x} {2 * b:#x} 0x2 0 16\n",
        f"42 {BASE + 6 * b:#x} {b:#x} 0x12 0 0\n",
        f"42 {BASE + 7 * b:#x} {b:#x} 0xa 0 8\n",
        f"42 {BASE + 8 * b:#x} {b:#x} 0x1 0 255\n",
    ]


def test_mappings_without_mm_intent_register_nothing() -> None:
    lay = _layout(*CLASSES)
    for name in ("none", "madvise-only", "memcg-protect", "intent"):
        m = load_mapping(name)
        assert not mm_intent.uses_mm_intent(m) and mm_intent.plan(m, lay, 42, BASE) == []
    assert mm_intent.uses_mm_intent(load_mapping("mm-intent"))


def test_too_many_ranges_for_one_address_space_is_bad_input() -> None:
    lay = _layout(*([IntentClass.DECODE_CRITICAL, IntentClass.COLD_SPILLABLE] * 513), pages_per_block=1)
    with pytest.raises(UserError, match="1024 intents"):
        mm_intent.check_fits(load_mapping("mm-intent"), lay)
    assert mm_intent.check_fits(load_mapping("mm-intent"), _layout(*CLASSES)) == 5


def test_reclaim_stats_parse_the_consumers_format(tmp_path: Path) -> None:
    reg = mic.Registry(tmp_path)
    assert reg.stats() is None  # a kernel whose reclaim does not read the registry has no stats file
    (tmp_path / "stats").write_text("lookups 12\nprotected_folios 3\nprotected_pages 3\ndemoted_folios 0\n"
                                    "demoted_pages 0\n")
    assert reg.stats() == {"lookups": 12, "protected_folios": 3, "protected_pages": 3, "demoted_folios": 0,
                           "demoted_pages": 0}
    (tmp_path / "stats").write_text("lookups twelve\n")
    with pytest.raises(ValueError, match="line 1"):
        reg.stats()


GUEST_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from harness.mapping import load_mapping
    from kernel_vm import mm_intent
    from kernel_vm.arena_process import ArenaProcess
    from kernel_vm.mix import make_layout, parse_mix, DEFAULT_MIX, format_mix

    out = Path(sys.argv[1])
    lay = make_layout(4 << 20, 64 << 10, 4096, parse_mix(format_mix(DEFAULT_MIX)), 7)
    with ArenaProcess(lay.arena_bytes, lay.block_bytes) as proc:
        facts = mm_intent.register(load_mapping("mm-intent"), lay, proc.pid, proc.address)
        dump = Path("/sys/kernel/debug/mm_intent/dump").read_text()
        left = mm_intent.clear(proc.pid)
        out.write_text(json.dumps({"stats": mm_intent.reclaim_stats(), "pid": proc.pid, "address": proc.address, "facts": facts, "dump": dump,
                                   "left": left, "dump_after": Path("/sys/kernel/debug/mm_intent/dump").read_text()}))
""")


@doctor.skip_unless("qemu.guest")
@pytest.mark.timeout(900)
def test_guest_kernel_lists_exactly_the_arena_register_lines(tmp_path: Path) -> None:
    from harness.remote.guest import GUEST_CPU, GUEST_KERNEL_ENV, GUEST_STATE_DIR, guest_lab_status
    from qemu_validation.boot import guest_command as guest
    from qemu_validation.kernel import build

    ready, why = guest_lab_status()  # the kernel `--target guest` boots: KVDS_GUEST_KERNEL's, else the default
    if not ready:
        pytest.skip(why)
    chosen = os.environ.get(GUEST_KERNEL_ENV, "").strip()
    kb = build.find(chosen) if chosen else build.cached(guest.DEFAULT_SPEC)
    script = tmp_path / "reg.py"
    script.write_text(GUEST_SCRIPT)
    out = tmp_path / "out.json"
    res = guest.boot_and_run(kb.id, ["sh", "-c", f"cd {Path.cwd()} && KVDS_STATE_DIR={GUEST_STATE_DIR} "
                                                f"{sys.executable} {script} {out}"], tmp_path,
                          host_root=True, timeout=840, memory_mb=1024, cpu=GUEST_CPU)
    assert res.status == 0 and not res.findings and not res.timed_out, res.failure
    got = json.loads(out.read_text())
    lay = make_layout(4 << 20, 64 << 10, 4096, parse_mix("decode-critical=10,prefetch-soon=10,warm=30,"
                                                          "cold-spillable=30,recompute-ok=15,done=5"), 7)
    want = [e.line() for e in mm_intent.plan(load_mapping("mm-intent"), lay, got["pid"], got["address"])]
    listed = [line + "\n" for line in got["dump"].splitlines() if line.split()[0] == str(got["pid"])]
    assert listed == want and len(want) == got["facts"]["ranges"] > 1
    # every block except the unregistered warm ones, in bytes
    assert got["facts"]["registered_bytes"] == int((lay.block_class != CLASSES.index(IntentClass.WARM)).sum()) * (64 << 10)
    if got["stats"] is not None:  # a kernel with the reclaim consumer (patch 0005) publishes its counters
        assert set(got["stats"]) >= {"lookups", "protected_folios", "protected_pages", "demoted_folios",
                                     "demoted_pages"}
    assert got["left"] == 0 and str(got["pid"]) not in [ln.split()[0] for ln in got["dump_after"].splitlines()]
