"""The priorities the block layer sees (block:block_rq_issue's ioprio field) equal the mapping, for both engines.

Real kernel, real loop device, real tracefs: a change in ioload's SQE layout or in how priorities are applied
shows up here as a class mismatch.
"""

from __future__ import annotations

import pytest

from harness import doctor, journal
from harness.mapping import load_mapping
from io_priority import device, variant_runs
from io_priority.workload import Workload
from tests.io.conftest import SMALL

pytestmark = [doctor.skip_unless("loop", "ioprio", "ioprio.rt", "ioprio.idle", "io_uring"),
              doctor.skip_unless("root")]

@pytest.mark.parametrize("engine", ["psync", "io_uring"])
def test_mapping_classes_reach_block_layer(engine: str) -> None:
    work = Workload(engine=engine, duration_s=0.7, rate=300.0, spill_qd=4)
    variants = [variant_runs.Variant("baseline", load_mapping("none")),
                variant_runs.Variant("intent", load_mapping("intent"))]
    with journal.session():
        dev = device.prepare("loop", SMALL)
        variant_runs.with_scheduler(dev, "mq-deadline")
        results, _ = variant_runs.run_variants(dev, work, variants, reps=1)
    sep = results["intent"][0]
    plan = variants[1].plan(engine)
    assert sep.reader["reads"] > 0 and sep.writer["writes"] > 0
    assert sep.block["lost_events"] == 0
    assert set(sep.block["by_op"]["R"]) == {str(plan.read_prio)}  # rt/0 from decode-critical
    assert set(sep.block["by_op"]["W"]) == {str(plan.write_prio)}  # idle/0 from cold-spillable
    base = results["baseline"][0].block["by_op"]
    assert "rt/0" not in base["R"] and "idle/0" not in base.get("W", {})
    # per-read context: an unpaced writer at QD 4 shares the device with reads; service <= latency from due
    b = results["baseline"][0]
    assert b.overlapped is not None and b.overlapped.any()
    assert (b.service_ns > 0).all() and (b.service_ns <= b.latencies_ns + 1000).all()


def test_slack_pacer_holds_spill_back_but_spills() -> None:
    work = Workload(engine="io_uring", duration_s=0.7, rate=300.0, spill_qd=4)
    variants = [variant_runs.Variant("paced", load_mapping("intent-paced"))]
    with journal.session():
        dev = device.prepare("loop", SMALL)
        results, _ = variant_runs.run_variants(dev, work, variants, reps=1, trace=False)
    w = results["paced"][0].writer
    assert w["gated_ns"] > 0, "the pacer never held a spill write back"
    assert w["writes"] > 0 and w["errors"] == 0
