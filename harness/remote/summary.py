"""The side-by-side summary printed after a multi-host run: one column per host, one row per fact or figure."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.errors import UserError
from harness.remote.execute import HostOutcome, capabilities
from harness.results import ResultStore

STATUS_STYLE = {"ok": "green", "failed": "red", "unavailable": "yellow", "pending": "yellow"}
MAX_METRIC_ROWS = 40


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Numeric leaves of a summary as dotted keys (booleans and strings are not figures)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix, float(obj)


def _fmt(v: float) -> str:
    if v == int(v) and abs(v) < 1e12:
        return str(int(v))
    return f"{v:.4g}"


def _doctor_counts(doc: Any) -> str:
    doc = capabilities(doc)
    if not isinstance(doc, list):
        return "-"
    ok = sum(1 for c in doc if isinstance(c, dict) and c.get("status") == "available")
    return f"{ok} of {len(doc)} available"


def _caps(doc: Any) -> dict[str, str]:
    doc = capabilities(doc)
    return {c["name"]: c.get("status", "?") for c in doc if isinstance(c, dict) and "name" in c} if isinstance(doc, list) else {}


def metric_rows(outcomes: Sequence[HostOutcome], store: ResultStore) -> list[tuple[str, list[str]]]:
    """(run kind + key, one value per host) for the fetched runs' summary.json figures."""
    per_host: list[dict[str, float]] = []
    for o in outcomes:
        vals: dict[str, float] = {}
        for name in o.runs:
            try:
                run = store.get(str(store.root / name))
                kind = run.meta.get("kind", "run")
                vals.update({f"{kind}: {k}": v for k, v in flatten(run.summary)
                             if not k.startswith("config.") and not k.endswith(".conf")})  # figures, not settings
            except (OSError, ValueError, UserError):  # an unreadable run: missing figures (a kvds bug still raises)
                continue
        per_host.append(vals)
    keys: list[str] = []
    for vals in per_host:
        keys += [k for k in vals if k not in keys]
    return [(k, [_fmt(v[k]) if k in v else "-" for v in per_host]) for k in keys[:MAX_METRIC_ROWS]]


def capability_rows(outcomes: Sequence[HostOutcome], all_rows: bool) -> list[tuple[str, list[str]]]:
    caps = [_caps(o.doctor if o.doctor is not None else (o.output if all_rows else None)) for o in outcomes]
    names: list[str] = []
    for c in caps:
        names += [n for n in c if n not in names]
    rows = []
    for n in names:
        vals = [c.get(n, "-") for c in caps]
        if all_rows or len(set(v for v in vals if v != "-")) > 1:
            rows.append((n, vals))
    return rows


def table(outcomes: Sequence[HostOutcome], store: ResultStore, title: str, all_caps: bool = False) -> Table:
    t = Table(title=title, show_lines=False)
    t.add_column("")
    for o in outcomes:
        t.add_column(o.tag, overflow="fold", max_width=48)
    row = lambda label, vals: t.add_row(escape(label), *[escape(v) for v in vals])  # noqa: E731
    row("target", [o.target for o in outcomes])
    t.add_row("status", *[f"[{STATUS_STYLE.get(o.status, 'white')}]{escape(o.status)}[/]" for o in outcomes])
    row("reason", [o.reason or "-" for o in outcomes])
    row("exit status", ["-" if o.exit_status is None else str(o.exit_status) for o in outcomes])
    row("kernel", [o.kernel or "-" for o in outcomes])
    row("seconds", [f"{o.seconds:.1f}" for o in outcomes])
    row("doctor", [_doctor_counts(o.doctor if o.doctor is not None else (o.output if all_caps else None))
                   for o in outcomes])
    row("restored on connect", [str(len(o.restored)) for o in outcomes])
    row("runs fetched", ["\n".join(o.runs) or "-" for o in outcomes])
    row("partial runs fetched", ["\n".join(o.partial_runs) or "-" for o in outcomes])
    caps = capability_rows(outcomes, all_caps)
    if caps:
        t.add_section()
        for name, vals in caps:
            row(name if all_caps else f"differs: {name}", vals)
    metrics = metric_rows(outcomes, store)
    if metrics:
        t.add_section()
        for name, vals in metrics:
            row(name, vals)
    return t


def print_summary(outcomes: Sequence[HostOutcome], store: ResultStore, record_path: str, title: str,
                  all_caps: bool = False) -> None:
    console = Console(width=200)
    console.print(table(outcomes, store, title, all_caps))
    for o in outcomes:
        for e in o.events + o.restored:
            console.print(escape(f"[{o.tag}] {e}"), highlight=False)
    console.print(f"invocation record: {record_path}", highlight=False)


def as_json(outcomes: Sequence[HostOutcome], record_path: str) -> dict[str, Any]:
    """The invocation's summary for emit (the record directory is the run)."""
    return {"hosts": {o.tag: {**o.as_dict(), "doctor": o.doctor} for o in outcomes}}
