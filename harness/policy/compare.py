"""Policy comparisons over several seeds: the numbers behind `kvds policy compare|sweep`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from harness.errors import UserError
from harness.policy.generator import generate
from harness.policy.metrics import aggregate, fmt, run_metrics
from harness.policy.policies import make_policy
from harness.policy.profiles import Profile
from harness.policy.simulator import simulate
from harness.policy.tiers import Tier, TierModel
from harness.policy.trace import Trace
from harness.progress import progress
from harness.stats import Estimate

MIN_SEEDS = 5


@dataclass(frozen=True)
class Capacity:
    """Fast-tier size: absolute bytes, or a fraction of the trace's peak live KV bytes."""

    fraction: float = 0.5
    bytes: int = 0

    def for_trace(self, trace: Trace) -> int:
        if self.bytes:
            return self.bytes
        if not 0 < self.fraction:
            raise UserError("--fast-fraction must be positive")
        return max(int(trace.block_size.max(initial=1)), int(trace.peak_live_bytes() * self.fraction))

    def label(self) -> str:
        return f"{self.bytes} B" if self.bytes else f"{self.fraction:g} x peak live KV"


def check_seeds(seeds: list[int]) -> None:
    if len(seeds) < MIN_SEEDS:
        raise UserError(f"need at least {MIN_SEEDS} seeds for confidence intervals (got {len(seeds)})")


def run_matrix(profile: Profile, seeds: list[int], policies: list[str], cap: Capacity, fast: Tier,
               slow: Tier, slow_bytes: int = 0,
               trace_for_seed: Callable[[int], Trace] | None = None) -> dict[str, list[dict[str, float]]]:
    """Per policy, the metrics of each seed's trace (the same trace for every policy).

    By default each seed generates `profile`; `trace_for_seed` replaces that (e.g. a request
    trace batched with each seed).
    """
    make = trace_for_seed or (lambda seed: generate(profile, seed))
    out: dict[str, list[dict[str, float]]] = {p: [] for p in policies}
    with progress(f"{profile.name}: simulating", total=len(seeds) * len(policies)) as bar:
        for seed in seeds:
            trace = make(seed)
            tiers = TierModel(fast, slow, cap.for_trace(trace), slow_bytes)
            for name in policies:
                out[name].append(run_metrics(simulate(trace, make_policy(name), tiers)))
                bar.advance(1)
    return out


COLUMNS = (("dc_miss_ratio", "dc miss/access", 1.0), ("hi_miss_ratio", "hi-prio miss/access", 1.0),
           ("step_p50_us", "step p50 ms", 1e-3), ("step_p99_us", "step p99 ms", 1e-3),
           ("spills", "spills", 1.0), ("prefetches", "prefetches", 1.0),
           ("prefetch_hit_ratio", "prefetch hit", 1.0))


def table(summary: dict[str, dict[str, Estimate]]) -> str:
    """Policies x metrics, each cell 'mean ±95% CI half-width'."""
    head = ["policy"] + [c[1] for c in COLUMNS]
    rows = [[name] + [fmt(est[key], scale) for key, _, scale in COLUMNS] for name, est in summary.items()]
    return render(head, rows)


def render(head: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table."""
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def summarize(per_policy: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, Estimate]]:
    return {name: aggregate(runs) for name, runs in per_policy.items()}
