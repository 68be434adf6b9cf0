"""The core commands' text output: one renderer per verb, each taking the verb's typed summary."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from harness.commands.summary import (DoctorSummary, MapSummary, ReportSummary, RestoreSummary, ResultsListSummary,
                                      ResultsShowSummary, RunSummary, TraceStatsSummary)
from harness.results import print_json

DOCTOR_STYLE = {"available": "green", "unavailable": "red", "needs-root": "yellow", "error": "bold magenta"}
# every mechanism a mapping can name, in the table's order
MAP_COLUMNS = ("madvise", "damos_action", "memcg", "zswap", "read_ioprio", "write_ioprio", "uring_ioprio",
               "write_throttle_mbps", "spill_pacing", "mm_intent", "mm_intent_priority", "net_priority", "dscp",
               "pacing_mbps", "congestion")


def doctor(summary: DoctorSummary) -> None:
    table = Table(title="kvds doctor", show_lines=False)
    for col in ("area", "capability", "status", "reason"):
        table.add_column(col, overflow="fold")
    for c in summary.capabilities:
        table.add_row(c["area"], c["name"], f"[{DOCTOR_STYLE[c['status']]}]{c['status']}[/]", c["reason"])
    Console(width=160).print(table)
    caps = summary.capabilities
    errors = summary.errors()
    n_ok = sum(c["status"] == "available" for c in caps)
    print(f"{n_ok} of {len(caps)} capabilities available"
          + (f"; {len(errors)} kvds error(s): {', '.join(errors)} (tracebacks on stderr)" if errors else ""))


def map(summary: MapSummary) -> None:  # noqa: A001 (the verb's name)
    if summary.mappings is not None:
        for n, description in summary.mappings.items():
            print(f"{n:15s} {description}")
        return
    assert summary.classes is not None and summary.capabilities is not None and summary.capability_status is not None
    console = Console(width=180)
    table = Table(title=f"mapping {summary.name}: {summary.description}")
    table.add_column("class")
    rows = summary.classes
    # only the mechanisms this mapping uses (every one for a mapping that uses none): 15 columns do not fit
    cols = [c for c in MAP_COLUMNS if any(c in d for d in rows.values())] or list(MAP_COLUMNS)
    for col in cols:
        table.add_column(col.replace("_", " "))
    for cls, d in rows.items():
        table.add_row(cls, *[", ".join(d[c]) if isinstance(d.get(c), list) else str(d.get(c, "-")) for c in cols])
    console.print(table)
    need = Table(title="capabilities this mapping needs (from kvds doctor)")
    for col in ("capability", "used by", "status", "reason"):
        need.add_column(col, overflow="fold")
    for name, classes in summary.capabilities.items():
        c = summary.capability_status[name]
        style = "green" if c["status"] == "available" else ("yellow" if c["status"] == "needs-root" else "red")
        need.add_row(name, ", ".join(classes), f"[{style}]{c['status']}[/]", c["reason"])
    console.print(need)


def report(summary: ReportSummary) -> None:
    for k, v in summary.paths.items():
        print(f"{k:9s} {v}")


def restore(summary: RestoreSummary) -> None:
    if not summary.journals:
        print("nothing to restore: no journals left by dead kvds processes")
    for r in summary.journals:
        print(f"{r['journal']}: {len(r['undone'])} change(s) undone, {len(r['failed'])} failed")
        for u in r["undone"]:
            print(f"  restored {u}")
        for f in r["failed"]:
            print(f"  FAILED {f}")


def results_list(summary: ResultsListSummary) -> None:
    for r in summary.runs:
        print(f"{r['run_id']}  {r['kind']}")


def results_show(summary: ResultsShowSummary) -> None:
    """A run's documents are JSON already: printed as such, for a person as for jq."""
    print_json(summary.as_dict())


def run(summary: RunSummary) -> None:
    stages = summary.stages
    n_ok = sum(s["status"] == "ok" for s in stages)
    skipped = [s for s in stages if s["status"] == "skipped"]
    failed = summary.failed()
    print(f"suite {summary.suite}: {n_ok} ok, {len(skipped)} skipped, {len(failed)} failed of {len(stages)} "
          f"stages, {summary.seconds:.0f} s")
    for s in skipped + failed:
        print(f"  {s['status']} {s['name']}: {s['reason']}")
    for line in summary.verdicts:
        print(f"  verdict: {line}")
    if summary.report:
        print(f"report: {summary.report['markdown']}")


def trace_stats(summary: TraceStatsSummary) -> None:
    s = summary
    print(f"{s.file}: {s.events} events, {s.requests} requests, {s.unique_blocks} unique blocks, "
          f"steps 0-{s.last_step}")
    print("event types:    " + ", ".join(f"{k}={v}" for k, v in sorted(s.event_types.items())))
    print("intent classes: " + ", ".join(f"{c}={n}" for c, n in s.intent_classes.items()))
