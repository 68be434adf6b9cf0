"""Readers for public LLM-serving request traces: Mooncake JSONL (arrivals, lengths and the hashes of 512-token
prefix blocks) and Azure LLM-inference CSV (arrivals and lengths). Nothing here knows a particular file: any trace
of these formats reads the same way.

Every line is checked before anything is built, and a bad one is a UserError naming `file:line` (exit 2):
truncated or non-object JSON, a missing, negative, non-integer or absurd length (more than MAX_REQUEST_TOKENS), a
timestamp that is not a number (Mooncake) or a date-time (Azure), a timestamp earlier than the line before it, and
`hash_ids` that are empty, not integers, or more than the input needs.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator

from harness.errors import UserError

HASH_BLOCK_TOKENS = 512          # Mooncake hashes the prompt in 512-token blocks
MAX_REQUEST_TOKENS = 10_000_000  # input + output: ten million tokens is beyond any served context window
FORMATS = ("mooncake", "azure")


@dataclass(frozen=True)
class ServedRequest:
    """One request of a serving trace, as the trace has it."""
    arrival_s: float              # seconds from the trace's first request
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # prefix blocks of HASH_BLOCK_TOKENS tokens (Mooncake); () without reuse data


def detect(path: Path) -> str | None:
    """'mooncake' or 'azure' from the file's first record, None when it is neither."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
    except OSError:
        return None
    if first.lstrip().startswith("{"):
        return "mooncake" if '"hash_ids"' in first and '"input_length"' in first else None
    cols = {c.strip().lower() for c in first.split(",")}
    return "azure" if {"timestamp", "contexttokens", "generatedtokens"} <= cols else None


def _count(value: object, what: str, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError(f"{where}: {what} {value!r} is not an integer")
    try:
        number = float(value)
    except ValueError:
        raise UserError(f"{where}: {what} {value!r} is not an integer") from None
    if not math.isfinite(number) or number != int(number):
        raise UserError(f"{where}: {what} {value!r} is not an integer")
    if number < minimum:
        raise UserError(f"{where}: {what} {int(number)} is below {minimum}")
    if number > MAX_REQUEST_TOKENS:
        raise UserError(f"{where}: {what} {int(number)} exceeds {MAX_REQUEST_TOKENS:,} tokens")
    return int(number)


def _checked(req: ServedRequest, where: str, last_s: float | None) -> ServedRequest:
    if req.input_tokens + req.output_tokens > MAX_REQUEST_TOKENS:
        raise UserError(f"{where}: {req.input_tokens + req.output_tokens} tokens exceeds {MAX_REQUEST_TOKENS:,}")
    if last_s is not None and req.arrival_s < last_s:
        raise UserError(f"{where}: timestamp goes backwards ({req.arrival_s:g} s after {last_s:g} s)")
    return req


def json_objects(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) per non-blank line of a JSON-lines request file; anything else names its line."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}:{n}: a request must be a JSON object")
        yield n, obj


def _mooncake(path: Path) -> Iterator[tuple[str, ServedRequest]]:
    t0: float | None = None
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for n, obj in json_objects(path, fh):
            where = f"{path}:{n}"
            missing = [k for k in ("timestamp", "input_length", "output_length", "hash_ids") if k not in obj]
            if missing:
                raise UserError(f"{where}: missing field {missing[0]}")
            ts = obj["timestamp"]
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
                raise UserError(f"{where}: timestamp {ts!r} is not a non-negative number of milliseconds")
            t0 = ts if t0 is None else t0
            inp = _count(obj["input_length"], "input_length", where, 1)
            out = _count(obj["output_length"], "output_length", where, 1)
            hashes = obj["hash_ids"]
            if not isinstance(hashes, list) or not hashes:
                raise UserError(f"{where}: hash_ids must be a non-empty list of integers")
            if any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in hashes):
                raise UserError(f"{where}: hash_ids must be non-negative integers")
            if (len(hashes) - 1) * HASH_BLOCK_TOKENS >= inp:
                raise UserError(f"{where}: {len(hashes)} hash_ids of {HASH_BLOCK_TOKENS} tokens for an input of "
                                f"{inp} tokens")
            yield where, ServedRequest((ts - t0) / 1000.0, inp, out, tuple(hashes))


def _azure_time(text: str, where: str) -> float:
    """A TIMESTAMP cell as seconds: a date-time (fractional digits beyond microseconds are dropped) or a number."""
    text = (text or "").strip()
    try:
        return float(text)
    except ValueError:
        pass
    head, dot, frac = text.partition(".")
    try:
        return datetime.fromisoformat(head + (dot + frac[:6] if dot else "")).timestamp()
    except ValueError:
        raise UserError(f"{where}: TIMESTAMP {text!r} is neither a date-time nor a number of seconds") from None


def _azure(path: Path) -> Iterator[tuple[str, ServedRequest]]:
    t0: float | None = None
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        cols = {c.strip().lower(): i for i, c in enumerate(header or [])}
        need = ("timestamp", "contexttokens", "generatedtokens")
        if not all(c in cols for c in need):
            raise UserError(f"{path}:1: an Azure trace needs the columns TIMESTAMP, ContextTokens, GeneratedTokens")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if not any(cell.strip() for cell in row):
                continue
            if len(row) < len(header or []):
                raise UserError(f"{where}: {len(row)} columns, the header has {len(header or [])}")
            t = _azure_time(row[cols["timestamp"]], where)
            t0 = t if t0 is None else t0
            yield where, ServedRequest(t - t0, _count(row[cols["contexttokens"]].strip(), "ContextTokens", where, 1),
                                       _count(row[cols["generatedtokens"]].strip(), "GeneratedTokens", where, 1))


def read(path: str | Path, fmt: str) -> list[ServedRequest]:
    """Every request of a `fmt` trace (checked line by line; see the module docstring)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise UserError(f"unknown serving-trace format {fmt!r} (known: {', '.join(FORMATS)})")
    if not path.is_file():
        raise UserError(f"trace file {str(path)!r} does not exist")
    out: list[ServedRequest] = []
    last: float | None = None
    for where, req in (_mooncake(path) if fmt == "mooncake" else _azure(path)):
        out.append(_checked(req, where, last))
        last = req.arrival_s
    if not out:
        raise UserError(f"{path}: the trace has no requests")
    return out


def select(reqs: list[ServedRequest], window: tuple[float, float] | None, max_requests: int | None,
           time_scale: float) -> list[ServedRequest]:
    """The requests arriving within `window` (seconds of trace time, START inclusive, END exclusive), the first
    `max_requests` of them, with arrivals re-based to the first one and divided by `time_scale` (2 = twice the
    arrival rate)."""
    if window is not None:
        reqs = [r for r in reqs if window[0] <= r.arrival_s < window[1]]
    if max_requests is not None:
        reqs = reqs[:max_requests]
    if not reqs:
        raise UserError("no request of the trace falls within --window / --max-requests")
    t0 = reqs[0].arrival_s
    return [ServedRequest((r.arrival_s - t0) / time_scale, r.input_tokens, r.output_tokens, r.hash_ids)
            for r in reqs]
