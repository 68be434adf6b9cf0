"""mm_intent as a mapping target: the mm-intent table parses and renders, bad mm_intent fields are refused (exit 2),
and the flag names mean what the kernel series' uapi header says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.intent import IntentClass
from harness.mapping import MM_INTENT_FLAGS, load_mapping
from tests.conftest import run_kvds

PATCH = next((Path(__file__).resolve().parents[2] / "kernel_patches" / "mm_intent").glob("0001-*.patch"))


def test_mm_intent_mapping_flags_and_priorities() -> None:
    m = load_mapping("mm-intent")
    dc, cold = m.for_class(IntentClass.DECODE_CRITICAL), m.for_class(IntentClass.COLD_SPILLABLE)
    assert dc.mm_intent == ("LATENCY_CRITICAL",) and dc.mm_intent_flags == 0x01 and dc.mm_intent_priority == 255
    assert cold.mm_intent_flags == 0x02
    assert m.for_class(IntentClass.PREFETCH_SOON).mm_intent_flags == 0x04
    assert m.for_class(IntentClass.RECOMPUTE_OK).mm_intent_flags == 0x08 | 0x02
    assert m.for_class(IntentClass.DONE).mm_intent_flags == 0x10 | 0x02
    assert m.for_class(IntentClass.WARM).mm_intent_flags is None  # left to the kernel: not registered
    # no madvise, no cgroup split: whatever protects decode-critical pages is the kernel reading the registry
    assert all(not m.for_class(c).madvise and m.for_class(c).memcg is None for c in IntentClass)
    assert set(m.capabilities()) == {"mm_intent"}


def test_memcg_protect_protects_what_mm_intent_marks_latency_critical() -> None:
    mi, mp = load_mapping("mm-intent"), load_mapping("memcg-protect")
    protected = {c for c in IntentClass if mp.for_class(c).memcg == "protect"}
    critical = {c for c in IntentClass if (mi.for_class(c).mm_intent_flags or 0) & MM_INTENT_FLAGS["LATENCY_CRITICAL"]}
    assert protected == critical == {IntentClass.DECODE_CRITICAL}


def test_flag_names_match_the_series_uapi_header() -> None:
    header = dict(re.findall(r"^\+#define MM_INTENT_(\w+)\s+(0x[0-9a-f]+)", PATCH.read_text(), re.M))
    assert {k: int(v, 16) for k, v in header.items() if k != "VALID_FLAGS"} == MM_INTENT_FLAGS
    assert int(header["VALID_FLAGS"], 16) == sum(MM_INTENT_FLAGS.values())


def test_kvds_map_renders_the_mm_intent_columns(kvds_env: dict[str, str]) -> None:
    res = run_kvds(["map", "--mapping", "mm-intent", "--json"], kvds_env, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["summary"]
    assert doc["classes"]["decode-critical"] == {"mm_intent": ["LATENCY_CRITICAL"], "mm_intent_priority": 255}
    assert doc["classes"]["warm"] == {}
    assert doc["capability_status"]["mm_intent"]["status"] in ("available", "unavailable", "needs-root")
    table = run_kvds(["map", "--mapping", "mm-intent"], kvds_env, timeout=120)
    assert table.returncode == 0 and "LATENCY_CRITICAL" in table.stdout and "RECOMPUTE_OK" in table.stdout


BAD = [
    ('mm_intent = ["URGENT"]', "unknown flag 'URGENT'"),
    ('mm_intent = []', "non-empty list"),
    ('mm_intent = "LATENCY_CRITICAL"', "non-empty list"),
    ('mm_intent = [1]', "non-empty list"),
    ('mm_intent = ["RECLAIMABLE", "RECLAIMABLE"]', "names a flag twice"),
    ('mm_intent = ["LATENCY_CRITICAL"]\nmm_intent_priority = 256', "integer 0-255"),
    ('mm_intent = ["LATENCY_CRITICAL"]\nmm_intent_priority = -1', "integer 0-255"),
    ('mm_intent = ["LATENCY_CRITICAL"]\nmm_intent_priority = "high"', "integer 0-255"),
    ('mm_intent = ["LATENCY_CRITICAL"]\nmm_intent_priority = true', "integer 0-255"),
    ('mm_intent_priority = 3', "needs mm_intent"),
]


@pytest.mark.parametrize("body, message", BAD)
def test_bad_mm_intent_fields_are_refused(tmp_path: Path, body: str, message: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(f'name = "x"\n[classes.decode-critical]\n{body}\n')
    with pytest.raises(UserError, match=re.escape(message)):
        load_mapping(str(p))


@pytest.mark.parametrize("body, message", [BAD[0], BAD[5], BAD[9]])
def test_bad_mm_intent_fields_exit_2_with_one_line(tmp_path: Path, kvds_env: dict[str, str], body: str,
                                                  message: str) -> None:
    p = tmp_path / "m.toml"
    p.write_text(f'name = "x"\n[classes.decode-critical]\n{body}\n')
    for argv in (["map", "--mapping", str(p)], ["vm", "bench", "--mapping", f"madvise-only,{p}"]):
        res = run_kvds(argv, kvds_env, timeout=120)
        assert res.returncode == 2, (argv, res.stdout, res.stderr)
        err = res.stderr.strip().splitlines()
        assert len(err) == 1 and message in err[0] and "Traceback" not in res.stderr
