"""`kvds remote baseline`'s work: the short per-host reference measurement (harness/remote/baseline.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.remote.baseline import run_baseline
from harness.results import Filed, StoredSummary


@dataclass(frozen=True)
class BaselineConfig:
    duration: float = 2.0  # seconds to measure
    file_mib: int = 64  # scratch file size
    seed: int = 0


@dataclass
class BaselineSummary(StoredSummary):
    """`kvds remote baseline`: the two reference latencies of this host."""
    pread_direct_4k: dict[str, Any] = field(default_factory=dict)  # 4 KiB O_DIRECT pread: count, p50/p90/p99 (us)
    anon_first_touch: dict[str, Any] = field(default_factory=dict)  # first touch of an anonymous page: the same


def run(cfg: BaselineConfig) -> Filed[BaselineSummary]:
    filed = run_baseline(cfg.duration, cfg.file_mib, cfg.seed)
    return Filed(filed, BaselineSummary.from_json(filed.summary))
