"""The delivery track's mapping fields (net_priority, dscp, pacing_mbps, congestion): the net-htb and net-paced
tables parse, every bad value is refused with one line naming the field, the capabilities they need are names
`kvds doctor` reports, and `kvds map` shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import doctor
from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import TCP_CONGESTION, available_mappings, load_mapping, registered_congestion
from tests.conftest import run_kvds

NET_FIELDS = ("net_priority", "dscp", "pacing_mbps", "congestion")
ALL = list(IntentClass)
DC, PS, WARM, COLD, RECOMPUTE, DONE = ALL


def _load(tmp_path: Path, body: str):
    p = tmp_path / "m.toml"
    p.write_text(f'name = "x"\n[classes.warm]\n{body}\n')
    return load_mapping(str(p))


def test_net_htb_mapping() -> None:
    m = load_mapping("net-htb")
    prio = {c: m.for_class(c).net_priority for c in IntentClass}
    assert prio == {DC: 6, PS: 4, WARM: 2, COLD: 0, RECOMPUTE: 0, DONE: 0}
    assert {c: m.for_class(c).dscp for c in IntentClass} == {DC: 46, PS: None, WARM: None, COLD: 8, RECOMPUTE: None,
                                                             DONE: None}
    assert all(m.for_class(c).pacing_mbps is None and m.for_class(c).congestion is None for c in IntentClass)
    assert m.capabilities() == {"net.qdisc.htb": ALL, "net.netns": [DC, COLD]}
    assert m.as_dict()["classes"]["decode-critical"] == {"net_priority": 6, "dscp": 46}


def test_net_paced_mapping() -> None:
    m = load_mapping("net-paced")
    assert {c: m.for_class(c).pacing_mbps for c in IntentClass} == {DC: None, PS: None, WARM: None, COLD: 850.0,
                                                                    RECOMPUTE: 850.0, DONE: 850.0}
    assert all(m.for_class(c).net_priority is None and m.for_class(c).dscp is None for c in IntentClass)
    assert m.for_class(DC).as_dict() == {}  # decode-critical is not paced
    assert m.capabilities() == {"net.pacing": [COLD, RECOMPUTE, DONE]}


def test_other_mappings_have_no_network_fields() -> None:
    for name in available_mappings():
        if name.startswith("net-"):
            continue
        m = load_mapping(name)
        assert all(getattr(m.for_class(c), f) is None for c in IntentClass for f in NET_FIELDS), name
        assert not [cap for cap in m.capabilities() if cap.startswith("net.")], name


@pytest.mark.parametrize("body, caps", [
    ("net_priority = 3", {"net.qdisc.htb"}),
    ("dscp = 0", {"net.netns"}),
    ("pacing_mbps = 0.5", {"net.pacing"}),
    ('congestion = "cubic"', {"net.cc.cubic"}),
    ('congestion = "bbr"\npacing_mbps = 100\nnet_priority = 0\ndscp = 63',
     {"net.cc.bbr", "net.pacing", "net.qdisc.htb", "net.netns"}),
])
def test_each_field_parses_and_names_its_capability(tmp_path: Path, body: str, caps: set[str]) -> None:
    m = _load(tmp_path, body)
    assert set(m.capabilities()) == caps
    assert all(v == [WARM] for v in m.capabilities().values())


BAD = [
    ("net_priority = 7", "net_priority"), ("net_priority = -1", "net_priority"), ("net_priority = 6.0", "net_priority"),
    ('net_priority = "6"', "net_priority"), ("net_priority = true", "net_priority"),
    ("dscp = 64", "dscp"), ("dscp = -1", "dscp"), ('dscp = "EF"', "dscp"), ("dscp = false", "dscp"),
    ("dscp = 46.0", "dscp"),
    ("pacing_mbps = 0", "pacing_mbps"), ("pacing_mbps = -700", "pacing_mbps"), ('pacing_mbps = "700"', "pacing_mbps"),
    ("pacing_mbps = true", "pacing_mbps"), ("pacing_mbps = inf", "pacing_mbps"), ("pacing_mbps = nan", "pacing_mbps"),
    ('congestion = ""', "congestion"), ('congestion = "CUBIC"', "congestion"), ('congestion = "cu-bic"', "congestion"),
    ("congestion = 5", "congestion"), ('congestion = "abcdefghijklmnop"', "congestion"),
    ('congestion = ["cubic"]', "congestion"), ('congestion = "nosuchcc"', "unknown TCP congestion control"),
]


@pytest.mark.parametrize("body, field", BAD)
def test_bad_values_are_refused_naming_the_field(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(UserError) as info:
        _load(tmp_path, body)
    msg = str(info.value)
    assert "\n" not in msg and "classes.warm." in msg and field in msg, msg
    key = body.split(" ")[0]
    assert f"classes.warm.{key}" in msg, msg


@pytest.mark.parametrize("body, field", [BAD[0], BAD[6], BAD[11], BAD[22]])
def test_kvds_map_refuses_a_bad_field_with_one_line(tmp_path: Path, kvds_env: dict[str, str], body: str,
                                                    field: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(f'name = "x"\n[classes.warm]\n{body}\n')
    res = run_kvds(["map", "--mapping", str(p)], kvds_env, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and field in err[0] and "Traceback" not in res.stderr, res.stderr


def test_every_congestion_name_a_mapping_may_use_is_a_doctor_capability() -> None:
    """A mapping's `congestion` is one of Linux's or one this kernel registered; the doctor knows each name (an
    unknown name would be kvds's bug: UnknownCapability)."""
    for cc in sorted(set(TCP_CONGESTION) | set(registered_congestion())):
        c = doctor.capability(f"net.cc.{cc}", area="net")
        assert c.area == "net" and c.status in ("available", "unavailable", "needs-root"), (cc, c)
    for name in ("net-htb", "net-paced"):
        for cap in load_mapping(name).capabilities():
            assert not doctor.capability(cap, area="net").is_error, cap


def test_kvds_map_shows_the_network_fields(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["map", "--mapping", "net-htb", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["summary"]
    assert doc["name"] == "net-htb"
    assert doc["classes"]["decode-critical"] == {"net_priority": 6, "dscp": 46}
    assert doc["classes"]["cold-spillable"] == {"net_priority": 0, "dscp": 8}
    assert doc["classes"]["warm"] == {"net_priority": 2}
    assert doc["capabilities"] == {"net.qdisc.htb": [c.value for c in ALL], "net.netns": ["decode-critical",
                                                                                         "cold-spillable"]}
    for cap in ("net.qdisc.htb", "net.netns"):
        st = doc["capability_status"][cap]
        assert st["area"] == "net" and st["status"] == doctor.capability(cap, area="net").status, st
    res = run_kvds(["map", "--mapping", "net-paced", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["summary"]
    assert doc["classes"]["recompute-ok"] == {"pacing_mbps": 850.0} and doc["classes"]["decode-critical"] == {}
    assert set(doc["capability_status"]) == {"net.pacing"}


def test_kvds_map_table_has_the_network_columns(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["map", "--mapping", "net-htb"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in res.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip()}
    assert "net priority" in res.stdout and "dscp" in res.stdout and "madvise" not in res.stdout
    assert rows["decode-critical"] == ["6", "46"] and rows["cold-spillable"] == ["0", "8"]
    assert rows["warm"] == ["2", "-"]
    res = run_kvds(["map", "--mapping", "net-paced"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "pacing mbps" in res.stdout and "850.0" in res.stdout and "net.pacing" in res.stdout
