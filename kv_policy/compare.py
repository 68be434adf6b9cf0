"""Policy comparisons over several seeds: the numbers behind `kvds policy compare|sweep`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from harness.errors import UserError
from kv_policy.generator import generate
from harness.report import fmt
from kv_policy.metrics import aggregate, gap_closed, paired
from kv_policy.parallel import jobs_for, metrics_per_policy
from kv_policy.registry import is_reference, make_policy
from kv_policy.profiles import Profile
from kv_policy.tiers import Tier, for_trace
from kv_policy.trace import Trace
from harness.progress import progress
from harness.stats import Estimate

MIN_SEEDS = 5
BASELINE, OPTIMUM = "LRU", "MIN"


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
        return max(int(trace.block_size.max(initial=1)), int(live_basis(trace) * self.fraction))

    def label(self) -> str:
        return f"{self.bytes} B" if self.bytes else f"{self.fraction:g} x peak live KV"


def live_basis(trace: Trace) -> int:
    """The bytes a fraction of "peak live KV" is taken of: on a serving trace the peak of what requests in flight
    reference (its prefix cache keeps every block ever named: counting those, a 1,000-request Mooncake slice's 10%
    held every working set and no policy missed); elsewhere every allocated, not yet freed block."""
    if trace.meta.get("source") == "serving-trace":
        return trace.peak_referenced_bytes()
    return trace.peak_live_bytes()


def check_seeds(seeds: list[int], point_ok: bool = True) -> None:
    """At least MIN_SEEDS for an interval; one seed is a point estimate (a timing run of a whole trace, printed as
    such) where `point_ok` (never for a verdict); two to four give an interval too wide to judge, so are refused."""
    if len(seeds) < MIN_SEEDS and not (point_ok and len(seeds) == 1):
        raise UserError(f"need at least {MIN_SEEDS} seeds for confidence intervals, or one for a point estimate "
                        f"(got {len(seeds)})")


def parse_spec(spec: str) -> tuple[str, dict[str, float]]:
    """'ExpectedNextUse:priority_weight=1.5' -> ('ExpectedNextUse', {'priority_weight': 1.5})."""
    name, *pairs = spec.split(":")
    params: dict[str, float] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        try:
            params[k.strip()] = float(v)
        except ValueError:
            sep = ""
        if not sep or not k.strip():
            raise UserError(f"policy {spec!r}: parameters are name=number, separated by ':'")
    return name.strip(), params


def build(spec: str):
    """A fresh policy from a spec string; unknown parameters are one-line errors."""
    name, params = parse_spec(spec)
    try:
        return make_policy(name, **params)
    except TypeError:
        raise UserError(f"policy {spec!r}: unknown parameter among {sorted(params)}") from None


def label(spec: str) -> str:
    """Canonical row label of a spec (the policy's own name plus any parameters as given)."""
    name, _, rest = spec.partition(":")
    return build(name).name + (f":{rest}" if rest else "")


def run_matrix(profile: Profile, seeds: list[int], policies: list[str], cap: Capacity, fast: Tier,
               slow: Tier, slow_bytes: int = 0,
               trace_for_seed: Callable[[int], Trace] | None = None, jobs: int = 0) -> dict[str, list[dict]]:
    """Per policy spec, the metrics of each seed's trace (the same trace for every policy).

    By default each seed generates `profile`; `trace_for_seed` replaces that (a request trace batched with
    each seed, or one trace file for every seed). The policies of a seed run in `jobs` worker processes
    (0: one per available CPU on a long trace; kv_policy/parallel.py).
    """
    make = trace_for_seed or (lambda seed: generate(profile, seed))
    out: dict[str, list[dict]] = {p: [] for p in policies}
    with progress(f"{profile.name}: simulating", total=len(seeds) * len(policies)) as bar:
        for seed in seeds:
            trace = make(seed)
            tiers = for_trace(trace, fast, slow, cap.for_trace(trace), slow_bytes)
            per = metrics_per_policy(trace, tiers, policies, jobs_for(trace, jobs, len(policies)), build,
                                     lambda: bar.advance(1))
            for spec in policies:
                out[spec].append(per[spec])
    return out


COLUMNS = (("dc_miss_ratio", "dc miss/access", 1.0), ("hi_miss_ratio", "hi", 1.0),
           ("mid_miss_ratio", "mid", 1.0), ("low_miss_ratio", "low", 1.0),
           ("slo_attainment", "SLO met", 1.0), ("slo_high", "SLO hi", 1.0),
           ("goodput_tok_s", "goodput tok/s", 1.0),
           ("step_p50_us", "step p50 ms", 1e-3), ("step_p99_us", "step p99 ms", 1e-3),
           ("spills", "spills", 1.0), ("prefetches", "prefetches", 1.0), ("prefetch_dropped", "pf dropped", 1.0),
           ("prefill_reload_tokens", "prefill reload tok/req", 1.0))


def table(summary: dict[str, dict[str, dict]]) -> str:
    """Policies x metrics, each cell an estimate 'mean [95% CI]' (harness.report.fmt); offline references below a
    rule."""
    head = ["policy"] + [c[1] for c in COLUMNS]
    row = lambda name, est: [name] + [fmt.estimate(est.get(key), scale) for key, _, scale in COLUMNS]  # noqa: E731
    rows = [row(n, e) for n, e in summary.items() if not is_reference(n.split(":")[0])]
    refs = [row(f"{n} (offline bound)", e) for n, e in summary.items() if is_reference(n.split(":")[0])]
    if refs:
        rows += [["-- offline references (read the future; not contenders) --"] + [""] * len(COLUMNS)] + refs
    return render(head, rows)


def versus(per_policy: dict[str, list[dict]]) -> dict[str, dict[str, Estimate]]:
    """Per contender, paired over seeds: decode-critical miss cut vs LRU, share of the LRU-to-MIN gap closed,
    high-priority SLO attainment minus LRU's, and total SLO attainment minus LRU's."""
    if BASELINE not in per_policy:
        return {}
    lru = per_policy[BASELINE]
    out = {}
    for name, runs in per_policy.items():
        if name == BASELINE or is_reference(name.split(":")[0]):
            continue
        row = {"dc_miss_cut_vs_lru": paired(runs, lru, "dc_miss_ratio"),
               "slo_high_minus_lru": paired(runs, lru, "slo_high", "difference"),
               "slo_minus_lru": paired(runs, lru, "slo_attainment", "difference")}
        if OPTIMUM in per_policy:
            row["gap_to_min_closed"] = gap_closed(runs, lru, per_policy[OPTIMUM])
        out[name] = row
    return out


def versus_table(vs: dict[str, dict[str, dict]]) -> str:
    head = ["policy vs LRU (paired over seeds)", "dc miss cut", "LRU-to-MIN gap closed", "SLO hi gain",
            "SLO gain"]
    keys = ("dc_miss_cut_vs_lru", "gap_to_min_closed", "slo_high_minus_lru", "slo_minus_lru")
    return render(head, [[n] + [fmt.estimate(r[k]) if k in r else fmt.missing("MIN not simulated") for k in keys]
                         for n, r in vs.items()])


def render(head: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table (a row with one long cell and blanks is a section line)."""
    cells = [r for r in [head] + rows if not (len(r) > 1 and all(c == "" for c in r[1:]))]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    out = [line(head), line(["-" * w for w in widths])]
    for r in rows:
        out.append(r[0] if len(r) > 1 and all(c == "" for c in r[1:]) else line(r))
    return "\n".join(out)


def summarize(per_policy: dict[str, list[dict]]) -> dict[str, dict[str, Estimate]]:
    return {name: aggregate(runs) for name, runs in per_policy.items()}
