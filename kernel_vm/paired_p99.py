"""Decode-critical re-access p99 of each variant against a reference mapping's, paired by repetition: a pure
function of the per-repetition samples a run stores, so a stored run is judged again with `kvds vm compare RUN`
(kernel_vm/compare_run.py) exactly as the bench judged it.

Why paired: repetition r of every variant uses the same block -> class layout (seed + r) and runs in the same
alternating round, so whatever made round r slow (the host stalling the TCG guest, another tenant) hits both
sides of the pair; harness.stats.paired_rep_ratio resamples pairs, so that shared drift cancels instead of
widening the interval.

Why a margin: two variants that both read resident pages can only ever be "inconclusive" against "<= 1".
The goal is "no worse than the reference" within MARGIN (non-inferiority).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from harness import stats
from harness.errors import UserError
from harness.results import Run

DC = "decode-critical"
Q = 99.0
MARGIN = 1.25
"""The coordinator's non-inferiority margin: a quarter of a ~2.6 us resident read in the guest, far below the cost
of one swap-in (the harm the goal guards against)."""
_SAMPLE = re.compile(r"^reaccess_ns__(?P<variant>.+)__(?P<cls>[a-z-]+)__rep(?P<rep>\d+)$")


@dataclass(frozen=True)
class P99VsReference:
    """One variant's decode-critical p99 over the reference's, pooled over paired repetitions, and its verdict."""
    variant: str
    reference: str
    pairs: int                 # repetitions present on both sides (repetition r paired with repetition r)
    ratio: stats.Estimate      # p99(variant) / p99(reference), paired_rep_ratio
    verdict: stats.Verdict     # judge_at_most(ratio, MARGIN)

    def as_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "reference": self.reference, "pairs": self.pairs,
                "ratio": self.ratio.as_dict(), "verdict": self.verdict.as_dict()}


def p99_vs_reference(samples: Mapping[str, Sequence[np.ndarray]], reference: str, q: float = Q,
                     margin: float = MARGIN, n_boot: int = 1000) -> dict[str, P99VsReference]:
    """samples: variant -> its decode-critical re-access latencies, one array per repetition, list index =
    repetition (the layout seed's offset). Every variant but the reference is compared with it pair by pair."""
    if reference not in samples:
        raise UserError(f"reference {reference!r} is not one of the variants: {', '.join(samples)}")
    ref = list(samples[reference])
    out = {}
    for name, reps in samples.items():
        if name == reference:
            continue
        ratio = stats.paired_rep_ratio(list(reps), ref, q, n_boot=n_boot)
        pairs = sum(1 for a, b in zip(reps, ref) if len(a) and len(b))
        out[name] = P99VsReference(name, reference, pairs, ratio,
                                   stats.judge_at_most(ratio, margin, f"{DC} p{q:g} / {reference}'s "))
    return out


def stored_samples(run: Run, cls: str = DC) -> dict[str, list[np.ndarray]]:
    """variant -> the class's re-access latencies (ns) per repetition, from a run's samples/*.npy."""
    found: dict[str, dict[int, str]] = {}
    for name in run.sample_names():
        m = _SAMPLE.match(name)
        if m and m["cls"] == cls:
            found.setdefault(m["variant"], {})[int(m["rep"])] = name
    out = {}
    for variant, by_rep in found.items():
        missing = sorted(set(range(max(by_rep) + 1)) - set(by_rep))
        if missing:  # a gap would shift every later repetition onto the wrong partner
            raise UserError(f"run {run.run_id}: {variant} has no {cls} samples for repetition {missing[0]}")
        out[variant] = [run.samples(by_rep[r]) for r in range(len(by_rep))]
    if not out:
        raise UserError(f"run {run.run_id} holds no {cls} re-access samples (is it a vm-bench run?)")
    return out


def resolve_reference(variants: Sequence[str], reference: str) -> str:
    """A variant name, or a mapping name standing for its one variant (`memcg-protect` -> `memcg-protect@mglru-off`)."""
    if reference in variants:
        return reference
    hits = [v for v in variants if v.split("@", 1)[0] == reference]
    if len(hits) != 1:
        raise UserError(f"--reference {reference!r} {'names several variants' if hits else 'is not in the run'}: "
                        f"{', '.join(hits or variants)}")
    return hits[0]
