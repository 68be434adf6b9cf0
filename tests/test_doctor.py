"""kvds doctor: its answers agree with independent evidence from the running kernel."""

from __future__ import annotations

import json
import mmap
import os
import threading
from pathlib import Path

from harness import doctor
from harness.ioprio import CLASS_IDLE, IoPrio, get_ioprio, set_ioprio
from harness.kconfig import config_state
from tests.conftest import run_kvds


def test_doctor_json_lists_every_area(kvds_env) -> None:
    res = run_kvds(["doctor", "--json"], kvds_env)
    assert res.returncode == 0, res.stderr
    caps = json.loads(res.stdout)
    names = [c["name"] for c in caps]
    assert len(names) == len(set(names))
    assert {c["area"] for c in caps} >= {"system", "io", "memory", "ebpf"}
    assert all(c["status"] in ("available", "unavailable", "needs-root") and c["reason"] for c in caps)


def test_config_derived_answers_match_kernel_config() -> None:
    for cap, option in (("kprobes", "KPROBES"), ("damon.vaddr", "DAMON_VADDR"), ("damon.paddr", "DAMON_PADDR")):
        state = config_state(option)
        if state != "unknown":
            assert doctor.capability(cap).ok == (state in ("y", "m")), cap


def test_mglru_answer_matches_sysfs() -> None:
    assert doctor.capability("mglru").ok == Path("/sys/kernel/mm/lru_gen/enabled").exists()


def test_foreign_kdamond_is_reported() -> None:
    base = Path("/sys/kernel/mm/damon/admin/kdamonds")
    running = base.is_dir() and any((d / "state").exists() and (d / "state").read_text().strip() == "on"
                                    for d in base.iterdir() if d.name.isdigit())
    assert doctor.capability("damon.free").ok == (not running)


def test_ioprio_answer_matches_a_real_call() -> None:
    result = []

    def body() -> None:
        try:
            set_ioprio(IoPrio(CLASS_IDLE, 0))
            result.append(get_ioprio() == IoPrio(CLASS_IDLE, 0))
        except OSError:
            result.append(False)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert doctor.capability("ioprio.idle").ok == result[0]


def test_madvise_pageout_answer_matches_a_real_call() -> None:
    m = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(21)
        works = True
    except OSError:
        works = False
    assert doctor.capability("madvise.MADV_PAGEOUT").ok == works


def test_root_answer() -> None:
    assert doctor.capability("root").ok == (os.geteuid() == 0)
