"""`kvds vm compare RUN`: a stored vm-bench run's decode-critical p99 judged against its reference again, from
its stored samples, repetitions paired (kernel_vm/paired_p99.py). Files no run: it reads one."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import UserError
from harness.results import Filed, ResultStore
from kernel_vm.paired_p99 import MARGIN, Q, p99_vs_reference, resolve_reference, stored_samples
from kernel_vm.summary import CompareSummary


@dataclass(frozen=True)
class CompareConfig:
    run: str                            # run id, unique prefix, path or 'latest'
    reference: str | None = None        # mapping or variant to judge against (None: the run's own --reference)
    q: float = Q
    margin: float = MARGIN


def run(cfg: CompareConfig) -> Filed[CompareSummary]:
    """Judge a stored vm-bench run again: the reference defaults to the one the run was asked for."""
    stored = ResultStore().get(cfg.run)
    samples = stored_samples(stored)
    ref = cfg.reference or (stored.meta.get("config") or {}).get("reference")
    if not ref:
        raise UserError(f"run {stored.run_id} was run without --reference: give one (variants: {', '.join(samples)})")
    ref = resolve_reference(list(samples), ref)
    rows = p99_vs_reference(samples, ref, cfg.q, cfg.margin)
    return Filed(None, CompareSummary(stored.run_id, ref, cfg.q, cfg.margin, {n: r.as_dict() for n, r in rows.items()},
                                      clock=stored.summary.get("clock") or "wall"))
