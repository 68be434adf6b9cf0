"""One swap-in's cost, measured on the run's zram (e2e/swapin_cost.py), and the term e2e adds to the simulated TPOT
with it (e2e/figures.py swap_in_term_us). The measurement runs in a subprocess with its own journal (zram swap);
run under /tmp/kvds-kernel.lock."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from harness import doctor
from e2e.figures import swap_in_term_us
from e2e.session import RepRecord
from tests.conftest import REPO

MEASURE = ("import json; from kernel_vm import swap_backend; from e2e import swapin_cost; "
           "swap_backend.set_up('zram', 64 << 20); print(json.dumps(swapin_cost.measure(256)))")


@doctor.skip_unless("root", "swap.zram")
def test_a_swap_in_is_timed_on_pages_that_really_come_back_from_swap(kvds_env: dict[str, str]) -> None:
    res = subprocess.run([sys.executable, "-c", MEASURE], cwd=REPO, env=kvds_env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # every page read back was a major fault (a swap-in), and it cost more than reading it resident
    assert got["valid"] and got["major_faults"] >= got["pages"] == 256, got
    assert got["swap_in_us"] > 0 and got["resident_read_us"] >= 0, got


def _rec(majfaults: int) -> RepRecord:
    return RepRecord("LRU / no intents", 0, np.zeros(3), {}, {}, {}, 0, {"majfaults": majfaults}, 1.0, 0)


def test_the_swap_in_term_is_swap_ins_per_step_times_their_cost() -> None:
    # 3,000 swap-ins a repetition on average over 100 steps at 5 us each: 150 us a step
    assert swap_in_term_us([_rec(2000), _rec(4000)], 100, 5.0) == 150.0
    assert swap_in_term_us([_rec(0)], 100, 5.0) == 0.0
