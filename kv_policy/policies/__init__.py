"""Eviction and prefetch policies, one per module, behind one interface (`base.Policy`): a policy turns what it
knows about a block into a heap key. kvds's own contenders, the offline bounds (kv_policy/offline.py,
kv_policy/expected_next_use.py keep theirs), and the rows modelled from serving engines' source (vLLM, SGLang,
TensorRT-LLM), which cite the code they model."""
from __future__ import annotations

from kv_policy.policies.base import STRIDE, Policy
from kv_policy.policies.hot_cold import HotCold
from kv_policy.policies.intent_aware import IntentAware
from kv_policy.policies.lru import LRU
from kv_policy.policies.predictive_hotness import PredictiveHotness
from kv_policy.policies.sglang_priority import SglangPriority
from kv_policy.policies.sglang_radix import SglangRadixLRU
from kv_policy.policies.trtllm_retention import TrtllmRetention
from kv_policy.policies.vllm_prefix import VllmPrefixCache

__all__ = ["STRIDE", "Policy", "LRU", "HotCold", "PredictiveHotness", "IntentAware", "VllmPrefixCache",
           "SglangRadixLRU", "SglangPriority", "TrtllmRetention"]
