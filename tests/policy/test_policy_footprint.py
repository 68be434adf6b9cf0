"""KV footprint from model shape."""
from __future__ import annotations

import pytest

from harness.errors import UserError
from kv_policy.footprint import model_shape


def test_known_models() -> None:
    assert model_shape("llama3-8b").bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131072
    assert model_shape("llama3-8b").block_bytes(16) == 2 << 20
    assert model_shape("llama2-7b").request_bytes(4096) == 2 * 32 * 32 * 128 * 2 * 4096


def test_custom_shape_and_dtype() -> None:
    assert model_shape("10:2:64:fp8").bytes_per_token() == 2 * 10 * 2 * 64


@pytest.mark.parametrize("bad", ["gpt-9", "1:2", "1:2:x", "1:2:64:fp7", "0:2:64"])
def test_bad_shapes_are_user_errors(bad: str) -> None:
    with pytest.raises(UserError):
        model_shape(bad)
