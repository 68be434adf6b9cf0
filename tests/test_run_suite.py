"""The main job end to end: `kvds run --quick` on this machine writes a report with every section, in numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import doctor
from tests.conftest import needs_root, run_kvds

SECTIONS = {
    "Environment": ("root",),
    "Stages": ("root",),
    "Decode-critical reads under spill pressure": ("loop", "ioprio"),
    "Kernel-side view: eBPF tracepoint histograms": ("loop", "ebpf.probe.blk"),
    "KV arena under memory pressure": ("memcg", "swap.zram"),
    "mm_intent kernel interface: QEMU validation": ("qemu.guest",),
    "Policies: simulated and replayed on a real kernel": ("root",),
}


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    nxt = md.find("\n## ", start + 1)
    return md[start: nxt if nxt != -1 else len(md)]


@needs_root
@pytest.mark.timeout(1800)
def test_kvds_run_quick_writes_a_complete_report(kvds_env) -> None:
    res = run_kvds(["run", "--quick", "--json"], kvds_env, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    statuses = {s["name"]: s for s in doc["stages"]}
    for name, st in statuses.items():
        assert st["status"] in ("ok", "skipped"), (name, st["reason"])
        if st["status"] == "skipped":
            assert st["reason"], name  # a skip always says why
    md = Path(doc["report"]["markdown"]).read_text()
    html = Path(doc["report"]["html"]).read_text()
    for title, needs in SECTIONS.items():
        if not all(doctor.capability(n).ok for n in needs):
            continue  # the stage was skipped for a missing mechanism; its reason is in the Stages table
        body = _section(md, title)
        numbers = re.findall(r"\d+\.\d+|\d{2,}", body)
        assert len(numbers) >= 5, f"section {title!r} has no figures:\n{body[:500]}"
        assert "nan" not in body.lower().split(), title
    for fig in re.findall(r"\]\((figures/[^)]+\.png)\)", md):
        p = Path(doc["report"]["markdown"]).parent / fig
        assert p.stat().st_size > 5000 and p.read_bytes().startswith(b"\x89PNG"), fig
    assert html.count("data:image/png;base64,") == md.count("](figures/")
    assert json.loads(Path(doc["report"]["json"]).read_text())["environment"][0]["kernel"]
