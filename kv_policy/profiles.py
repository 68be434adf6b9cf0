"""Workload profiles: the knobs that shape a generated trace, one documented dataclass per profile."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from harness.errors import UserError


@dataclass(frozen=True)
class PriorityClass:
    """A tenant class: its share of requests, priority range and per-token deadline (TPOT SLO)."""

    weight: float
    prio_lo: int
    prio_hi: int
    tpot_us: float


@dataclass(frozen=True)
class Profile:
    """Parameters of a generated workload (see README.md, "Profiles").

    Attention per decode step reads the first `sink_blocks`, the last `window_blocks`, and
    up to `heavy_hitters` older blocks drawn from a per-request power law (exponent
    `hh_gamma`; larger means a smaller hot set), so the same blocks are re-read across steps.
    """

    name: str
    model: str = "qwen2.5-1.5b"
    block_tokens: int = 16
    n_requests: int = 64
    arrivals_per_step: float = 0.5
    prompt_tokens: tuple[int, int] = (128, 2048)   # log-uniform range
    gen_tokens: tuple[int, int] = (64, 512)        # log-uniform range
    max_active: int = 16                           # admitted requests (KV resident or spilled)
    batch: int = 8                                 # requests decoded per step, drawn uniformly from the active ones
    classes: tuple[PriorityClass, ...] = (
        PriorityClass(0.3, 70, 100, 50_000.0),
        PriorityClass(0.5, 40, 69, 100_000.0),
        PriorityClass(0.2, 0, 39, 500_000.0),
    )
    sink_blocks: int = 1
    window_blocks: int = 4
    heavy_hitters: int = 8
    hh_gamma: float = 2.0
    spec_draft: int = 0          # speculative decoding: draft tokens per step (0 = off)
    spec_accept: float = 0.7     # per-draft-token acceptance probability
    rag_docs: int = 0            # shared retrieved-document corpus size (0 = no RAG)
    rag_doc_tokens: int = 512
    rag_docs_per_request: int = 3
    rag_gamma: float = 2.0       # popularity skew of documents
    queue_hints: int = 2         # waiting requests (FCFS head) whose shared documents the engine hints prefetch-soon

    def as_dict(self) -> dict:
        return asdict(self)

    def check(self) -> None:
        """Reject parameter combinations the engine cannot run."""
        if self.n_requests <= 0 or self.max_active <= 0 or self.batch <= 0:
            raise UserError(f"profile {self.name}: n_requests, max_active and batch must be positive")
        if not self.classes or sum(c.weight for c in self.classes) <= 0:
            raise UserError(f"profile {self.name}: needs at least one priority class with positive weight")
        for lo, hi, what in ((*self.prompt_tokens, "prompt_tokens"), (*self.gen_tokens, "gen_tokens")):
            if not 0 < lo <= hi:
                raise UserError(f"profile {self.name}: {what} range must satisfy 0 < lo <= hi")
        for name in ("block_tokens", "rag_doc_tokens"):
            if getattr(self, name) <= 0:
                raise UserError(f"profile {self.name}: {name} must be positive")
        for name in ("sink_blocks", "window_blocks", "heavy_hitters", "spec_draft", "rag_docs",
                     "rag_docs_per_request", "arrivals_per_step", "queue_hints"):
            if getattr(self, name) < 0:
                raise UserError(f"profile {self.name}: {name} must not be negative")
        if self.hh_gamma <= 0 or self.rag_gamma <= 0:
            raise UserError(f"profile {self.name}: hh_gamma and rag_gamma must be positive")
        if self.rag_docs and self.rag_docs_per_request == 0:
            raise UserError(f"profile {self.name}: rag_docs_per_request must be at least 1 when rag_docs is set")
        if not 0.0 <= self.spec_accept <= 1.0:
            raise UserError(f"profile {self.name}: spec_accept must be within [0, 1]")


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("balanced"),
        Profile(
            "deadline_pressure", arrivals_per_step=1.0, n_requests=96, max_active=32, batch=12,
            classes=(PriorityClass(0.5, 70, 100, 20_000.0), PriorityClass(0.3, 40, 69, 60_000.0),
                     PriorityClass(0.2, 0, 39, 400_000.0)),
        ),
        Profile(
            "rag_mixed_priority", prompt_tokens=(32, 256), rag_docs=48, rag_doc_tokens=512,
            rag_docs_per_request=3, max_active=24, batch=8, n_requests=96,
            classes=(PriorityClass(0.4, 70, 100, 40_000.0), PriorityClass(0.6, 0, 39, 800_000.0)),
        ),
        Profile("speculative_decode", spec_draft=4, spec_accept=0.7, gen_tokens=(128, 1024)),
        Profile(
            "long_context_extreme", model="llama3-8b", prompt_tokens=(16_384, 131_072), gen_tokens=(128, 512),
            n_requests=10, arrivals_per_step=0.02, max_active=4, batch=2, sink_blocks=4, window_blocks=8,
            heavy_hitters=32, hh_gamma=3.0,
        ),
    )
}


def get_profile(name: str, **overrides) -> Profile:
    """A named profile with optional field overrides (e.g. n_requests=1000)."""
    if name not in PROFILES:
        raise UserError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")
    prof = replace(PROFILES[name], **overrides) if overrides else PROFILES[name]
    prof.check()
    return prof
