"""KV-cache footprint from a model's shape: decides block sizes and how much memory a trace needs."""
from __future__ import annotations

from dataclasses import dataclass

from harness.errors import UserError

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class ModelShape:
    """What determines KV size: K and V per layer, per KV head (GQA), per head dimension."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype: str = "fp16"
    params: float = 0.0  # weights (count); 0 = estimated from the shape (see `n_params`)

    def bytes_per_token(self) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x dtype bytes."""
        if self.dtype not in DTYPE_BYTES:
            raise UserError(f"unknown dtype {self.dtype!r} (known: {', '.join(DTYPE_BYTES)})")
        if min(self.layers, self.kv_heads, self.head_dim) <= 0:
            raise UserError(f"model {self.name}: layers, kv_heads and head_dim must be positive")
        return int(2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES[self.dtype])

    def block_bytes(self, block_tokens: int) -> int:
        """Bytes of one paged-attention block holding `block_tokens` tokens of every layer."""
        if block_tokens <= 0:
            raise UserError("block_tokens must be positive")
        return self.bytes_per_token() * block_tokens

    def n_params(self) -> float:
        """Weight count: published for known models; else estimated as 12 x layers x d^2 with the model width d
        taken as 4 x kv_heads x head_dim (grouped-query attention with 4 query heads per KV head)."""
        if self.params:
            return self.params
        d = 4 * self.kv_heads * self.head_dim
        return 12.0 * self.layers * d * d

    def request_bytes(self, tokens: int) -> int:
        """KV bytes for one request of `tokens` tokens (unpaged)."""
        return self.bytes_per_token() * tokens


# Published configurations (config.json of each model).
MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape("llama3-8b", layers=32, kv_heads=8, head_dim=128, params=8.03e9),
        ModelShape("llama3-70b", layers=80, kv_heads=8, head_dim=128, params=70.6e9),
        ModelShape("mistral-7b", layers=32, kv_heads=8, head_dim=128, params=7.24e9),
        ModelShape("qwen2.5-1.5b", layers=28, kv_heads=2, head_dim=128, params=1.54e9),
        ModelShape("llama2-7b", layers=32, kv_heads=32, head_dim=128, params=6.74e9),
        ModelShape("tinyllama-1.1b", layers=22, kv_heads=4, head_dim=64, params=1.10e9),
    )
}


def model_shape(spec: str) -> ModelShape:
    """A known model name, or 'layers:kv_heads:head_dim[:dtype]'."""
    if spec in MODELS:
        return MODELS[spec]
    parts = spec.split(":")
    if len(parts) in (3, 4):
        try:
            layers, kv_heads, head_dim = (int(p) for p in parts[:3])
        except ValueError:
            raise UserError(f"model {spec!r}: expected integers in layers:kv_heads:head_dim[:dtype]") from None
        shape = ModelShape(spec, layers, kv_heads, head_dim, parts[3] if len(parts) == 4 else "fp16")
        shape.bytes_per_token()
        return shape
    raise UserError(f"unknown model {spec!r}: use one of {', '.join(MODELS)} or layers:kv_heads:head_dim[:dtype]")
