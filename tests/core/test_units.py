"""harness.units.parse_size, the one size parser: binary units whatever the spelling; bad input a UserError."""

from __future__ import annotations

import pytest

from harness.errors import UserError
from harness.units import format_size, parse_size


@pytest.mark.parametrize("prefix,shift", [("K", 10), ("M", 20), ("G", 30), ("T", 40)])
def test_every_spelling_of_a_unit_is_the_same_power_of_two(prefix: str, shift: int) -> None:
    spellings = [prefix, prefix + "B", prefix + "iB", prefix.lower(), prefix.lower() + "b", prefix.lower() + "ib"]
    assert {parse_size(f"3{s}") for s in spellings} == {3 << shift}
    assert parse_size(f"3 {prefix}iB") == 3 << shift


def test_bytes_fractions_and_ints() -> None:
    assert parse_size("4096") == 4096
    assert parse_size("4096B") == 4096
    assert parse_size("1.5G") == 3 << 29
    assert parse_size("1.5K") == 1536
    assert parse_size(512) == 512


@pytest.mark.parametrize("bad", ["", "M", "12Q", "1MBB", "-1M", "0", "0.1", "1e400G", "abc", "1 2M", 0, -5])
def test_bad_sizes_are_user_errors_naming_the_option(bad: object) -> None:
    with pytest.raises(UserError) as err:
        parse_size(bad, what="--fast-bytes")  # type: ignore[arg-type]
    assert "--fast-bytes" in str(err.value) and "\n" not in str(err.value)


def test_format_size_round_trips() -> None:
    for n in (1, 1000, 16384, 3 << 20, 5 << 30, 7 << 40):
        assert parse_size(format_size(n)) == n
