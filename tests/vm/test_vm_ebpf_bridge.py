"""The VM bench's eBPF probes: a real absence is a skip with its reason, a kvds error is an error.

The bench used to wrap the taskstats query and the reclaim probe in `except Exception`, so a bug in kvds read
as "taskstats skipped" in the summary. These tests ask the real kernel, and make one kvds function raise to
stand for a kvds bug (a correct checkout has none to trigger on demand)."""
from __future__ import annotations

import pytest

from harness import doctor
from kernel_vm import ebpf_bridge


def _close(probes: list) -> None:
    for p in probes:
        p.close()


def test_a_kvds_error_in_the_taskstats_query_fails_the_bench(monkeypatch):
    import ebpf.taskstats

    def broken() -> tuple[bool, str]:
        raise RuntimeError("kvds bug in the taskstats client")

    monkeypatch.setattr(ebpf.taskstats, "family_status", broken)
    with pytest.raises(RuntimeError, match="kvds bug"):
        ebpf_bridge.probes(False)


def test_a_kvds_error_in_the_reclaim_probe_fails_the_bench(monkeypatch):
    def broken(*names: str, area: str | None = None) -> None:
        raise doctor.ProbeError("ebpf.probe.reclaim: probing failed inside kvds")

    monkeypatch.setattr(doctor, "require", broken)
    with pytest.raises(doctor.ProbeError):
        probes, _ = ebpf_bridge.probes(True)
        _close(probes)


def test_probes_follow_the_doctor_on_this_host():
    """What the bench attaches is exactly what the doctor says works here; skips carry the doctor's reason."""
    ts = doctor.capability("ebpf.taskstats", area="ebpf")
    rc = doctor.capability("ebpf.probe.reclaim", area="ebpf")
    probes, doc = ebpf_bridge.probes(True)
    try:
        names = [p.name for p in probes]
        assert ("taskstats" in names) == ts.ok
        assert ("reclaim" in names) == rc.ok
        if not ts.ok:
            assert "taskstats skipped" in doc["reason"]
        if not rc.ok:
            assert rc.reason in doc["reason"]
        assert doc["status"] == ("+".join(names) or "skipped")
    finally:
        _close(probes)


def test_reclaim_histograms_off_unless_asked():
    probes, doc = ebpf_bridge.probes(False)
    try:
        assert "reclaim" not in [p.name for p in probes]
        assert "reclaim histograms: off (pass --ebpf)" in doc["reason"]
    finally:
        _close(probes)
