"""The KTAP parser on the validator's real output shape, and on truncated or malformed documents."""

from __future__ import annotations

from qemu_validation.boot import ktap

GOOD = """KTAP version 1
1..3
ok 1 interface_present
# wrong errno: "1 0x1000" (9 bytes): want EINVAL, got EBADMSG
not ok 2 errno_table # 1 check(s) failed
# kvds: malformed_writes=45
# kvds: malformed_writes=10000 mismatches=0 fuzz_ms=2345 seed=1
ok 3 random_malformed_writes
"""


def test_counts_and_counters() -> None:
    rep = ktap.parse(GOOD)
    assert (rep.version, rep.planned, rep.passed, rep.failed) == (1, 3, 2, 1)
    assert rep.complete and not rep.ok
    assert rep.counters["malformed_writes"] == 10045 and rep.counters["mismatches"] == 0
    bad = rep.results[1]
    assert bad.name == "errno_table" and bad.reason == "1 check(s) failed"
    assert any("want EINVAL" in d for d in bad.diagnostics)


def test_truncated_run_is_incomplete() -> None:
    rep = ktap.parse("KTAP version 1\n1..10\nok 1 a\nok 2 b\n")
    assert not rep.complete and not rep.ok
    assert "planned 10 tests, ran 2" in rep.problems


def test_missing_plan_and_garbage() -> None:
    rep = ktap.parse("ok 1 a\nrandom kernel noise\n")
    assert not rep.ok
    assert any("no plan" in p for p in rep.problems) and any("unparsable" in p for p in rep.problems)


def test_skip_directive_and_subtests() -> None:
    rep = ktap.parse("KTAP version 1\n1..2\n    KTAP version 1\n    1..1\n    ok 1 inner\nok 1 outer\n"
                     "ok 2 skipped_one # SKIP no debugfs\n")
    assert rep.ok and rep.skipped == 1 and rep.passed == 1
    assert "ok 1 inner" in rep.results[0].diagnostics


def test_out_of_order_numbers() -> None:
    rep = ktap.parse("KTAP version 1\n1..2\nok 2 b\nok 1 a\n")
    assert not rep.ok and any("out of order" in p for p in rep.problems)
