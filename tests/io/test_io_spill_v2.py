"""Spill scheduler v2 (`spill_pacing = "deadline"`, mapping spill-v2) and writeback throttling as a mapping option
(`wbt_lat_usec`), on a real loop device: the writer's batches stay within the sizes and depth it may choose, its
learned model is reported per (size, depth), every write it made is in its log, and the wbt knob of the kvds loop
device is set for the variant that asks and back to the device's own value afterwards (knob journal)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness import doctor, journal
from harness.errors import UserError
from harness.mapping import load_mapping, parse_mapping
from io_priority import device, variant_figures, variant_runs
from io_priority.workload import Workload
from tests.io.conftest import SMALL


def test_wbt_lat_usec_is_validated() -> None:
    doc = {"name": "x", "description": "", "classes": {"cold-spillable": {"wbt_lat_usec": -1}}}
    with pytest.raises(UserError, match="wbt_lat_usec"):
        parse_mapping(doc, "x")
    assert load_mapping("wbt-spill").classes[next(iter(load_mapping("wbt-spill").classes))] is not None
    assert variant_runs.Variant("w", load_mapping("wbt-spill")).plan("psync").wbt_lat_usec == 1000
    assert variant_runs.Variant("v", load_mapping("spill-v2")).plan("psync").pacing == "deadline"


@doctor.skip_unless("loop", "io_uring", "ioprio", "ioprio.rt")
@doctor.skip_unless("root")
def test_deadline_writer_batches_within_bounds() -> None:
    work = Workload(engine="psync", duration_s=1.0, rate=200.0, spill_qd=4, spill_bs=512 << 10,
                    spill_bs_min=128 << 10)
    with journal.session():
        dev = device.prepare("loop", SMALL)
        v2 = variant_runs.Variant("v2", load_mapping("spill-v2"))
        results, _ = variant_runs.run_variants(dev, work, [v2], reps=1)
    r = results["v2"][0]
    w = r.writer
    assert w["writes"] > 0 and w["errors"] == 0 and w["batches"] > 0
    assert r.wlog.shape[0] == w["writes"]  # every write logged: submit, complete, bytes
    assert set(np.unique(r.wlog[:, 2])) <= {128 << 10, 256 << 10, 512 << 10}
    assert (r.wlog[:, 1] > r.wlog[:, 0]).all()
    for b in w["model"]:
        assert b["size"] in (128 << 10, 256 << 10, 512 << 10) and 1 <= b["depth"] <= 4 and b["n"] >= 1
    assert sum(b["chosen"] for b in w["model"]) == w["batches"]
    assert set(r.block["by_op"]["W"]) == {"be/7"}  # the mapping's spill class reached the block layer


@doctor.skip_unless("loop", "ioprio", "ioprio.rt")
@doctor.skip_unless("root")
def test_wbt_knob_set_per_variant_and_restored() -> None:
    work = Workload(duration_s=0.3, rate=200.0, spill_qd=2, spill_kind="buffered")
    variants = [variant_runs.Variant("baseline", load_mapping("none")),
                variant_runs.Variant("wbt", load_mapping("wbt-spill"))]
    with journal.session():
        dev = device.prepare("loop", SMALL)
        knob = Path("/sys/block") / dev.name / "queue" / "wbt_lat_usec"
        own = knob.read_text().strip()
        seen: list[str] = []
        from io_priority import workload as wl

        orig = wl.Runner._apply_wbt

        def spy(self: wl.Runner, plan: wl.Applied | None) -> None:
            orig(self, plan)
            seen.append(knob.read_text().strip())

        wl.Runner._apply_wbt = spy  # type: ignore[method-assign]
        try:
            variant_runs.run_variants(dev, work, variants, reps=2, trace=False)
        finally:
            wl.Runner._apply_wbt = orig  # type: ignore[method-assign]
        assert seen == [own, "1000", "1000", own]  # ABBA: baseline, wbt, wbt, baseline
        assert knob.read_text().strip() == own


def test_v2_window_says_what_half_the_spill_needs() -> None:
    from io_priority.workload import RepResult

    ms = 1_000_000
    due = np.arange(100, dtype=np.int64) * 5 * ms
    clk = np.stack([due, due, due + ms], axis=1)  # 1 ms reads every 5 ms
    rep = RepResult(clk[:, 2] - clk[:, 0], {}, None, None, clocks=clk)
    model = [[{"size": 1 << 20, "depth": 2, "n": 10, "tail_ns": 3 * ms, "chosen": 5},    # 2 MiB in 3 ms: fits 4 ms
              {"size": 1 << 20, "depth": 4, "n": 10, "tail_ns": 6 * ms, "chosen": 1},    # 4 MiB in 6 ms: does not
              {"size": 1 << 20, "depth": 8, "n": 2, "tail_ns": 1 * ms, "chosen": 2}]]    # 2 observations: not trusted
    w = variant_figures._v2_window([rep], {"model": model}, base_mb_s=1000.0, unloaded=[rep])
    assert w["interval_ms"] == pytest.approx(5.0) and w["free_ms"] == pytest.approx(4.0)
    assert w["needed_mib_per_window"] == pytest.approx(0.5 * 1000e6 * 0.005 / 2**20)
    assert w["needed_write_mb_s_at_tail"] == pytest.approx(2.5e6 / 1e6 / 0.004)
    assert w["largest_fitting_batch_mib_per_rep"] == [2.0]
