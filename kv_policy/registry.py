"""Every policy by name, in one module of its own: the policies import their base class from policies.py, and
the registry imports every policy, so keeping it beside the base class made an import cycle."""
from __future__ import annotations

from harness.errors import UserError
from kv_policy.expected_next_use import DeadlineAware, ExpectedNextUse
from kv_policy.offline import MIN, PrioMIN, RateOracle
from kv_policy.policies import (LRU, HotCold, IntentAware, Policy, PredictiveHotness, SglangPriority, SglangRadixLRU,
                                 TrtllmRetention, VllmPrefixCache)

ENGINE_ROWS = (VllmPrefixCache, SglangRadixLRU, SglangPriority, TrtllmRetention)


def _registry() -> dict[str, type[Policy]]:
    """Every policy by name: the online contenders, the rows modelled from serving engines, then the offline
    references."""
    return {p.name: p for p in (LRU, HotCold, PredictiveHotness, IntentAware, DeadlineAware, ExpectedNextUse,
                                *ENGINE_ROWS, MIN, PrioMIN, RateOracle)}


def make_policy(name: str, **params: float) -> Policy:
    """A fresh policy instance by (case-insensitive) name; `params` go to its constructor (e.g. priority_weight)."""
    for key, cls in _registry().items():
        if key.lower() == name.lower():
            return cls(**params)
    raise UserError(f"unknown policy {name!r} (known: {', '.join(_registry())})")


def is_reference(name: str) -> bool:
    """An offline bound (MIN, PrioMIN): shown as a reference row, never as a contender."""
    return bool(getattr(_registry().get(name), "reference", False))


def engine_of(name: str) -> str:
    """The serving engine a real-system row models ("" for kvds's own policies and the offline bounds)."""
    return str(getattr(_registry().get(name), "engine", ""))


def parse_policies(text: str) -> list[str]:
    """A comma list of 'all', 'engines' and policy specs ('Name' or 'Name:param=value[:param=value]') -> canonical
    specs, contenders first, offline references last."""
    specs: list[str] = []
    for part in text.split(","):
        name, sep, rest = part.strip().partition(":")
        if name.lower() == "all" and not sep:   # kvds's policies and the offline bounds (RateOracle: named only)
            specs += [n for n, c in _registry().items()
                      if n not in specs and c not in ENGINE_ROWS and c is not RateOracle]
        elif name.lower() == "engines" and not sep:  # the rows modelled from serving engines
            specs += [c.name for c in ENGINE_ROWS if c.name not in specs]
        elif name:
            specs.append(make_policy(name).name + (sep + rest if sep else ""))
    ref = lambda s: is_reference(s.split(":")[0])  # noqa: E731
    return [s for s in specs if not ref(s)] + [s for s in specs if ref(s)]
