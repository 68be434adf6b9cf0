"""Importers: the public prototype's KV intent JSONL, request-level traces (CSV or JSONL), and public serving
traces (Mooncake JSONL with prefix hashes, Azure CSV; serving_traces.py reads them, serving_load.py runs them).

Prototype events are read through `harness.trace_format` (every field validated there) and
classified with `harness.intent.classify`, the single definition of intent classes. Request
traces are run through the same batching engine as generated workloads.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import UserError
from harness.intent import IntentClass, classify
from kv_policy import codes, serving_load, serving_traces
from kv_policy.engine import Engine, RequestSpec
from kv_policy.footprint import model_shape
from kv_policy.profiles import Profile
from kv_policy.trace import Trace
from harness.trace_format import read_prototype_jsonl

# Prototype event type -> kvds event kind. Placement decisions the prototype's own simulator
# made (spills, evictions, promotions) are not workload: the simulated policy makes its own.
PROTO_KIND = {
    "ALLOCATED": codes.ALLOC, "ACCESSED": codes.ACCESS, "PREFETCHED": codes.HINT,
    "MARKED_DECODE_CRITICAL": codes.HINT, "MARKED_COLD": codes.HINT, "MARKED_WARM": codes.HINT,
    "MARKED_HOT": codes.HINT, "MARKED_DONE": codes.HINT, "FREED": codes.FREE, "COMPLETED": codes.FREE,
}
PROTO_SKIPPED = frozenset({"SPILLED", "EVICTED", "PROMOTED", "DEMOTED", "RECOMPUTED"})
DEFAULT_DEADLINE_US = 100_000.0


def import_prototype(path: str | Path) -> Trace:
    """Prototype JSONL -> Trace; blocks keyed by (request_id, block_id)."""
    ids: dict[tuple[str, int], int] = {}
    requests: dict[str, int] = {}
    size: list[int] = []
    owner: list[int] = []
    prio: list[int] = []
    deadline: list[float] = []
    step, kind, block, crit, cls = [], [], [], [], []
    skipped = 0
    last_step = -1
    for ev in read_prototype_jsonl(path):
        if ev.event_type in PROTO_SKIPPED:
            skipped += 1
            continue
        if ev.step < last_step:
            raise UserError(f"{path}:{ev.line_no}: step {ev.step} goes backwards (previous {last_step})")
        last_step = ev.step
        kb = ev.block
        key = kb.key()
        b = ids.get(key)
        if b is None:
            b = ids[key] = len(size)
            size.append(kb.size_bytes)
            owner.append(requests.setdefault(kb.request_id, len(requests)))
            prio.append(kb.request_priority)
            deadline.append(float(kb.deadline_us) if kb.deadline_us is not None else DEFAULT_DEADLINE_US)
        elif size[b] != kb.size_bytes:
            raise UserError(f"{path}:{ev.line_no}: block {key} changes size from {size[b]} to {kb.size_bytes}")
        intent = classify(kb, ev.step)
        step.append(ev.step)
        kind.append(PROTO_KIND[ev.event_type])
        block.append(b)
        crit.append(intent is IntentClass.DECODE_CRITICAL)
        cls.append(codes.CLASS_BY_NAME[intent.value])
    trace = Trace(
        step=np.asarray(step, dtype=np.int64), kind=np.asarray(kind, dtype=np.uint8),
        block=np.asarray(block, dtype=np.int32), critical=np.asarray(crit, dtype=bool),
        cls=np.asarray(cls, dtype=np.uint8), block_size=np.asarray(size, dtype=np.int64),
        block_request=np.asarray(owner, dtype=np.int32), block_priority=np.asarray(prio, dtype=np.uint8),
        block_deadline_us=np.asarray(deadline, dtype=np.float64),
        meta={"source": "prototype-jsonl", "path": str(path), "skipped_placement_events": skipped,
              "requests": len(requests)},
    )
    trace.validate()
    return trace


# Request-trace columns and the aliases accepted for them (Azure LLM inference traces use
# TIMESTAMP / ContextTokens / GeneratedTokens).
ALIASES = {
    "arrival_s": ("arrival_s", "arrival", "timestamp", "arrival_time"),
    "prompt_tokens": ("prompt_tokens", "input_tokens", "context_tokens", "prompt_len"),
    "gen_tokens": ("gen_tokens", "generated_tokens", "output_tokens", "completion_tokens"),
    "deadline_ms": ("deadline_ms", "deadline"),
    "priority": ("priority", "request_priority"),
}
REQUIRED_COLUMNS = ("arrival_s", "prompt_tokens", "gen_tokens")


def _rows(path: Path):
    """(line number, dict) per request row of a CSV or JSONL file."""
    try:
        fh = path.open("r", encoding="utf-8", newline="")
    except OSError as exc:
        raise UserError(f"cannot read request trace {str(path)!r}: {exc.strerror}") from None
    with fh:
        if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
            yield from serving_traces.json_objects(path, fh)
        else:
            reader = csv.DictReader(fh)
            for row in reader:
                yield reader.line_num, row


def _norm(key: object) -> str:
    """Column names compare without case, spaces, dashes or underscores (ContextTokens == context_tokens)."""
    return "".join(ch for ch in str(key).lower() if ch.isalnum())


def _field(row: dict, name: str, where: str, required: bool) -> float | None:
    lowered = {_norm(k): v for k, v in row.items() if k is not None}
    for alias in map(_norm, ALIASES[name]):
        if alias in lowered and lowered[alias] not in (None, ""):
            value = lowered[alias]
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise UserError(f"{where}: {name} {value!r} is not a number") from None
            if not math.isfinite(number) or number < 0:
                raise UserError(f"{where}: {name} must be a non-negative finite number")
            return number
    if required:
        raise UserError(f"{where}: missing column {name} (accepted names: {', '.join(ALIASES[name])})")
    return None


def read_requests(path: str | Path, step_ms: float, default_priority: int = 50,
                  default_tpot_ms: float = 100.0) -> list[RequestSpec]:
    """Parse a request trace; arrival times are seconds, relative or absolute (shifted to start at 0)."""
    path = Path(path)
    raw = []
    for n, row in _rows(path):
        where = f"{path}:{n}"
        arrival, prompt, gen = (_field(row, c, where, True) for c in REQUIRED_COLUMNS)
        if prompt < 1 or gen < 1:
            raise UserError(f"{where}: prompt_tokens and gen_tokens must be at least 1")
        deadline = _field(row, "deadline_ms", where, False)
        prio = _field(row, "priority", where, False)
        if prio is not None and prio > 100:
            raise UserError(f"{where}: priority {prio:g} is outside 0-100")
        tpot_us = (deadline * 1000.0 / gen) if deadline else default_tpot_ms * 1000.0
        raw.append((arrival, int(prompt), int(gen), int(prio if prio is not None else default_priority), tpot_us))
    if not raw:
        raise UserError(f"request trace {str(path)!r} has no requests")
    t0 = min(r[0] for r in raw)
    return [RequestSpec(int((a - t0) * 1000.0 / step_ms), p, g, pr, t) for a, p, g, pr, t in raw]


def import_requests(path: str | Path, profile: Profile, seed: int, step_ms: float = 20.0) -> Trace:
    """Request trace -> KV block events, batched and attended as in `profile`."""
    specs = read_requests(path, step_ms)
    block_bytes = model_shape(profile.model).block_bytes(profile.block_tokens)
    trace = Engine(profile, block_bytes, seed).run(specs)
    trace.meta = {"source": "request-trace", "path": str(path), "profile": profile.as_dict(), "seed": seed,
                  "step_ms": step_ms, "requests": len(specs), "block_bytes": block_bytes}
    return trace


@dataclass(frozen=True)
class TraceOptions:
    """A trace file and how to read it (`--trace`, `--format`, `--window`, `--max-requests`, `--time-scale`)."""
    path: str
    format: str = "auto"                       # auto (by content), npz, prototype, requests, mooncake, azure
    window: tuple[float, float] | None = None  # seconds of trace time, START:END (serving traces)
    max_requests: int | None = None            # the first N requests (of the window)
    time_scale: float = 1.0                    # arrivals divided by this (2 = twice the rate)
    step_ms: float = 20.0                      # decode step length: arrival seconds -> steps

    def resolved(self) -> Path:
        """The file: a path, or the name of a slice shipped in kv_policy/data (SHIPPED)."""
        return SHIPPED.get(self.path, Path(self.path))

    def kind(self) -> str:
        """The format, detected from the file's content when `auto`."""
        p = self.resolved()
        if not p.exists():
            raise UserError(f"trace file {str(p)!r} does not exist")
        if self.format != "auto":
            return self.format
        if p.suffix == ".npz":
            return "npz"
        served = serving_traces.detect(p)
        if served:
            return served
        if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
            with p.open("r", encoding="utf-8", errors="replace") as fh:
                first = next((line for line in fh if line.strip()), "")
            if '"intent"' in first:
                return "prototype"
        return "requests"

    def as_dict(self) -> dict:
        return {"path": str(self.resolved()), "format": self.kind(), "window": self.window,
                "max_requests": self.max_requests, "time_scale": self.time_scale, "step_ms": self.step_ms}


DATA = Path(__file__).resolve().parent / "data"
SHIPPED = {"mooncake-slice": DATA / "mooncake_conversation_slice.jsonl",
           "azure-slice": DATA / "azure2023_conv_slice.csv"}
FORMATS = ("auto", "npz", "prototype", "requests", *serving_traces.FORMATS)


def import_serving(opts: TraceOptions, fmt: str, profile: Profile, seed: int) -> Trace:
    """A Mooncake or Azure trace -> KV block events: priorities by the seeded rule, concurrency scaled to the
    arrival rate, hashed prefixes as shared blocks (serving_load.py)."""
    path = opts.resolved()
    reqs = serving_traces.select(serving_traces.read(path, fmt), opts.window, opts.max_requests, opts.time_scale)
    prof = serving_load.engine_profile(profile, reqs, opts.step_ms)
    block_bytes = model_shape(prof.model).block_bytes(prof.block_tokens)
    trace = Engine(prof, block_bytes, seed).run(serving_load.specs(reqs, prof, seed, opts.step_ms))
    trace.meta = {"source": "serving-trace", "format": fmt, "path": str(path), "seed": seed,
                  "priorities": serving_load.priority_rule(prof, seed), "requests": len(reqs),
                  "window": opts.window, "time_scale": opts.time_scale, "step_ms": opts.step_ms,
                  "max_active": prof.max_active, "profile": prof.as_dict(), "block_bytes": block_bytes,
                  "prefix_blocks": len({h for r in reqs for h in r.hash_ids})}
    return trace


def load_trace(opts: TraceOptions | str | Path, profile: Profile | None = None, seed: int = 0) -> Trace:
    """Any supported trace file: .npz (kvds), prototype JSONL, a request CSV/JSONL, or a Mooncake / Azure
    serving trace (by content unless the format is named)."""
    from kv_policy.profiles import get_profile
    from kv_policy.trace import load_npz

    if not isinstance(opts, TraceOptions):
        opts = TraceOptions(str(opts))
    if opts.format not in FORMATS:
        raise UserError(f"--format {opts.format!r}: one of {', '.join(FORMATS)}")
    if not opts.step_ms > 0:
        raise UserError("--step-ms must be positive")
    if not opts.time_scale > 0:
        raise UserError("--time-scale must be positive")
    fmt, p = opts.kind(), opts.resolved()
    profile = profile or get_profile("balanced")
    if fmt == "npz":
        return load_npz(p)
    if fmt == "prototype":
        return import_prototype(p)
    if fmt in serving_traces.FORMATS:
        return import_serving(opts, fmt, profile, seed)
    return import_requests(p, profile, seed, opts.step_ms)
