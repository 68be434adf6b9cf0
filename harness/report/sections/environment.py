"""The environment table (one column per suite) and the list of what differs between them."""

from __future__ import annotations

from harness.report.context import ReportContext

FIELDS = (
    ("host", "host"), ("kernel", "kernel"), ("arch", "arch"), ("cpu", "CPU"), ("cpus", "CPUs"),
    ("mem_total_bytes", "memory"), ("loadavg", "load average at start"), ("kvds_revision", "kvds revision"),
    ("time_utc", "time (UTC)"),
)


def _fmt(key: str, v: object) -> str:
    if v is None:
        return "-"
    if key == "mem_total_bytes":
        return f"{int(v) / 2**30:.1f} GiB"  # type: ignore[arg-type]
    if key == "loadavg":
        return ", ".join(f"{x:.2f}" for x in v)  # type: ignore[union-attr]
    return str(v)


def render(ctx: ReportContext) -> None:
    doc = ctx.doc
    doc.heading("Environment")
    headers = ["", *[s.label for s in ctx.suites]]
    rows = [[label, *[_fmt(key, s.environment.get(key)) for s in ctx.suites]] for key, label in FIELDS]
    pk = sorted({k for s in ctx.suites for k in s.environment.get("packages", {})})
    rows += [[f"package {k}", *[s.environment.get("packages", {}).get(k, "-") for s in ctx.suites]] for k in pk]
    doc.table(headers, rows)
    if len(ctx.suites) > 1:
        diffs = [r[0] for r in rows if len(set(r[1:])) > 1 and r[0] not in ("time (UTC)", "load average at start")]
        doc.para("Differences between the runs: " + (", ".join(diffs) if diffs else "none besides time and load."))
    ctx.summary["environment"] = [{k: s.environment.get(k) for k, _ in FIELDS} for s in ctx.suites]


def render_stages(ctx: ReportContext) -> None:
    """What each stage of the suite did: ok, skipped (with the doctor's reason) or failed."""
    doc = ctx.doc
    if not any(s.stages for s in ctx.suites):
        return
    doc.heading("Stages")
    for s in ctx.suites:
        if not s.stages:
            continue
        rows = [[st["name"], st["status"], f"{st['seconds']:.1f}" if st.get("seconds") is not None else "- (not recorded)",
                 st.get("reason") or "",
                 ", ".join(st.get("runs", []))] for st in s.stages]
        if len(ctx.suites) > 1:
            doc.para(f"Suite {s.label}:")
        doc.table(["stage", "status", "wall time (s)", "reason", "result runs"], rows)
    ctx.summary["stages"] = {s.label: {st["name"]: st["status"] for st in s.stages} for s in ctx.suites}
