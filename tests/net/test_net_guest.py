"""`kvds net bench --target guest`: the delivery bench in the net lab kernel
(qemu_validation/kernel/configs/net.config), which has what this host lacks: netem for round-trip delay and loss, fq for pacing. A real TCG boot of the
base kernel + net fragment (2 vCPUs); one short repetition per variant. Asserts behaviour (the netem root and the
leaves are where the path says and carry the traffic, the run comes home), never timings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness import doctor
from tests.conftest import needs_root, run_kvds

RTT_MS = 1.0


def _guest_run(kvds_env: dict[str, str], args: list[str]) -> tuple[dict, Path]:
    from harness.remote.guest import guest_lab_status

    ready, why = guest_lab_status("net")
    if not ready:
        pytest.skip(why)
    res = run_kvds(["net", "bench", "--target", "guest", "--reps", "1", "--duration-s", "1", "--no-anchor",
                    "--rate-mbit", "100", *args, "--json"], kvds_env, timeout=1500)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    guest = json.loads(res.stdout)["summary"]["hosts"]["guest"]
    assert guest["status"] == "ok" and len(guest["runs"]) == 1
    run = Path(kvds_env["KVDS_RESULTS_DIR"]) / guest["runs"][0]
    assert json.loads((run / "meta.json").read_text())["remote"]["host"] == "guest"
    return json.loads((run / "summary.json").read_text()), run


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow  # a guest boot and a bench under TCG: `make test-slow`
@pytest.mark.timeout(1600)
def test_guest_bench_with_netem_delay_and_loss(kvds_env: dict[str, str]) -> None:
    s, run = _guest_run(kvds_env, ["--variants", "unloaded,baseline,net-htb", "--rtt-ms", f"{RTT_MS:g}",
                                   "--loss-pct", "0.5"])
    assert (s["config"]["rtt_ms"], s["config"]["loss_pct"]) == (RTT_MS, 0.5)
    for name in ("unloaded", "baseline", "net-htb"):
        assert s["variants"][name]["fetches"] > 0
        # netem holds every round trip at least RTT_MS: no fetch can be served faster (a mechanism, not a timing)
        with np.load(run / f"samples-{name}.npz") as z:
            assert int(z["service_ns_0"].min()) >= RTT_MS * 1e6, name
    # the loss leaves sit under the bottleneck classes and carry the data: "<class> netem" rows
    leaves = {c: d for c, d in s["variants"]["net-htb"]["qdisc"].items() if c.endswith(" netem")}
    assert leaves and sum(d["bytes"] for d in leaves.values()) > 0, s["variants"]["net-htb"]["qdisc"]


@needs_root
@doctor.skip_unless("qemu.guest")
@pytest.mark.slow
@pytest.mark.timeout(1600)
def test_guest_bench_with_fq_leaves_paces_the_bulk(kvds_env: dict[str, str]) -> None:
    s, _ = _guest_run(kvds_env, ["--variants", "baseline,net-paced", "--leaf", "fq"])
    assert s["config"]["leaf"] == "fq"
    q = s["variants"]["net-paced"]["qdisc"]
    fq = {c: d for c, d in q.items() if c.endswith(" fq")}
    assert fq and sum(d["bytes"] for d in fq.values()) > 0, q
    assert s["variants"]["net-paced"]["classes"]["bulk"]["sockopt"]["pacing_bytes_s"] > 0
