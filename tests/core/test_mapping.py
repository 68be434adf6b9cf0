"""The declarative mapping: every shipped mapping loads, and bad mappings are rejected clearly."""

from __future__ import annotations

import pytest

from harness.errors import UserError
from harness.intent import IntentClass
from harness.ioprio import CLASS_IDLE, CLASS_RT, IoPrio, parse_ioprio
from harness.mapping import available_mappings, load_mapping


def test_all_shipped_mappings_load() -> None:
    names = available_mappings()
    assert {"intent", "none", "ioprio-only", "throttle-only", "madvise-only", "intent-paced"} <= set(names)
    for n in names:
        m = load_mapping(n)
        assert m.name == n


def test_intent_mapping_separates_classes() -> None:
    m = load_mapping("intent")
    dc = m.for_class(IntentClass.DECODE_CRITICAL)
    cold = m.for_class(IntentClass.COLD_SPILLABLE)
    assert dc.read_ioprio == IoPrio(CLASS_RT, 0) and cold.write_ioprio == IoPrio(CLASS_IDLE, 0)
    assert "MADV_PAGEOUT" in m.for_class(IntentClass.RECOMPUTE_OK).madvise
    assert dc.memcg == "protect" and cold.memcg == "squeeze"
    caps = m.capabilities()
    assert IntentClass.DECODE_CRITICAL in caps["ioprio.rt"]
    assert caps["ioprio"].count(IntentClass.WARM) == 1


def test_none_mapping_is_empty() -> None:
    m = load_mapping("none")
    assert all(m.for_class(c).as_dict() == {} for c in IntentClass)
    assert m.capabilities() == {}


def test_ioprio_encoding() -> None:
    p = parse_ioprio("rt/0")
    assert p.value == 1 << 13 and IoPrio.from_value(p.value) == p
    assert str(parse_ioprio("idle")) == "idle/0"
    assert parse_ioprio("be/7").value == (2 << 13) | 7


@pytest.mark.parametrize(
    "body, message",
    [
        ('name = "x"\n[classes.lukewarm]\n', "unknown intent class"),
        ('name = "x"\n[classes.warm]\nfoo = 1\n', "unknown mechanism 'foo'"),
        ('name = "x"\n[classes.warm]\nread_ioprio = "rt/9"\n', "must be 0-7"),
        ('name = "x"\n[classes.warm]\nread_ioprio = "urgent/0"\n', "unknown I/O priority class"),
        ('name = "x"\n[classes.warm]\nmadvise = ["MADV_NAP"]\n', "unknown advice"),
        ('name = "x"\n[classes.warm]\nwrite_throttle_mbps = -5\n', "positive number"),
        ('name = "x"\n[classes.warm]\nmemcg = "pin"\n', "memcg must be one of"),
        ('[classes.warm]\n', "'name' is missing"),
        ('name = "x"\nclasses = 3\n', "'classes' must be a table"),
        ('name = "x"\nextra = 1\n', "unknown key 'extra'"),
        ('name = "x\n', "not valid TOML"),
    ],
)
def test_bad_mapping_files(tmp_path, body: str, message: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(body)
    with pytest.raises(UserError, match=message):
        load_mapping(str(p))


def test_unknown_mapping_name() -> None:
    with pytest.raises(UserError, match="unknown mapping 'nosuch'"):
        load_mapping("nosuch")
