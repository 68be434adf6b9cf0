"""Which repetitions of two variants ran side by side, and their percentile ratio resampled by those pairs.

Why: the device under the loop file drifts (its median moved 2x across a fio-check; the unloaded reference's p99
spikes in single repetitions), and a ratio whose two sides are resampled independently keeps that shared drift in
its interval. When repetition r of a variant and repetition r of the reference ran in the same round of the ABBA
alternation, a drift both saw cancels in a ratio resampled by pair (harness.stats.paired_rep_ratio).

Side by side means the same repetition number in one run's order (`rep_order`, [[rep, variant], ...] as run):
the same round of the alternation, one contiguous block with nothing of another scheduler in between. Repetition
numbers are unique to a round (the sweep's auto-grow continues them), so an unloaded repetition run with another
point's growth round is never paired with this point: pairing by list index would do exactly that. How many other
repetitions ran between the two of a pair is kept (`between`): 0 in a growth round (reference, point, point,
reference), up to the number of variants minus 2 in a first round. Fewer than MIN_REPS pairs: no paired ratio,
the unpaired one (stats.rep_ratio) is used and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from harness import stats

PAIRED = "paired by repetition"
UNPAIRED = "unpaired (repetitions resampled independently)"


@dataclass(frozen=True)
class Pair:
    a: int        # index into variant a's repetitions (its k-th repetition in the order)
    b: int        # index into variant b's repetitions
    rep: int      # the repetition number both ran in
    between: int  # repetitions of other variants run between the two


def side_by_side(order: Sequence[Sequence[Any]], a: str, b: str) -> list[Pair]:
    """The pairs of repetitions of `a` and `b` that ran in the same round of the alternation (same rep number)."""
    seen: dict[str, int] = {}
    where: dict[tuple[str, int], tuple[int, int]] = {}  # (variant, rep) -> (index within the variant, position)
    for pos, (rep, name) in enumerate(order):
        k = seen.get(name, 0)
        seen[name] = k + 1
        where[(str(name), int(rep))] = (k, pos)
    out = []
    for (name, rep), (ka, pa) in where.items():
        if name != a or (b, rep) not in where:
            continue
        kb, pb = where[(b, rep)]
        out.append(Pair(ka, kb, rep, abs(pa - pb) - 1))
    return sorted(out, key=lambda p: p.rep)


def ratio(a: Sequence[np.ndarray], b: Sequence[np.ndarray], pairs: Sequence[Pair] | None, q: float = 99.0,
          n_boot: int = 1000) -> tuple[stats.Estimate, dict[str, Any]]:
    """p_q(a) / p_q(b): resampled by pair when at least MIN_REPS pairs ran side by side, else unpaired; the rule
    used, the number of pairs and the largest gap within a pair come back beside the estimate."""
    usable = [p for p in pairs or [] if p.a < len(a) and p.b < len(b) and len(a[p.a]) and len(b[p.b])]
    if len(usable) >= stats.MIN_REPS:
        est = stats.paired_rep_ratio([a[p.a] for p in usable], [b[p.b] for p in usable], q=q, n_boot=n_boot)
        return est, {"rule": PAIRED, "pairs": len(usable), "reps": [len(a), len(b)],
                     "max_between": max(p.between for p in usable)}
    est = stats.rep_ratio(a, b, q=q, n_boot=n_boot)
    why = "no repetition order" if pairs is None else f"{len(usable)} pairs < {stats.MIN_REPS}"
    return est, {"rule": UNPAIRED, "pairs": len(usable), "reps": [len(a), len(b)], "why": why}
