"""Figures owed by runs made in the guest lab are drawn by the host that files them (harness/deferred_figures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import deferred_figures
from harness.results import ResultStore


def render(summary: dict, path: Path) -> None:
    path.write_text(json.dumps(summary))


def render_broken(summary: dict, path: Path) -> None:
    raise ValueError("no axes for this summary")


def test_deferred_then_drawn_on_filing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = ResultStore(tmp_path).new_run("x", {})
    run.write_summary({"a": 1})
    monkeypatch.setenv(deferred_figures.DEFER_ENV, "1")
    assert deferred_figures.draw(run, "a.png", "tests.core.test_deferred_figures:render", {"a": 1}) == "deferred"
    assert deferred_figures.draw(run, "b.png", "tests.core.test_deferred_figures:render_broken", {"a": 1}) == "deferred"
    assert not (run.path / "a.png").exists()
    assert run.read_json("figures-owed") == {"a.png": "tests.core.test_deferred_figures:render",
                                             "b.png": "tests.core.test_deferred_figures:render_broken"}
    done = deferred_figures.draw_owed(run)
    assert done == {"a.png": "drawn", "b.png": "ValueError: no axes for this summary"}
    assert json.loads((run.path / "a.png").read_text()) == {"a": 1}
    # still owed, says why
    assert run.read_json("figures-owed") == {"b.png": "tests.core.test_deferred_figures:render_broken"}


def test_drawn_at_once_without_the_guest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(deferred_figures.DEFER_ENV, raising=False)
    run = ResultStore(tmp_path).new_run("x", {})
    assert deferred_figures.draw(run, "a.png", "tests.core.test_deferred_figures:render", {"b": 2}) == "drawn"
    assert (run.path / "a.png").exists() and deferred_figures.draw_owed(run) == {}


def test_vm_plot_from_strict_json_with_missing_p99(tmp_path: Path) -> None:
    """A deferred vm figure is drawn from summary.json, where a p99 the tail rule withheld is null: no bar for it,
    no crash (it used to subtract None)."""
    from kernel_vm.mix import CLASSES
    from kernel_vm.plot import plot_summary

    def cls(p99: dict) -> dict:
        mean = {"value": 10.0, "lo": None, "hi": None}
        return {"pages": 100, "reaccess_us": {"p99": p99}, "swapped_out_pages": {"mean": mean},
                "dropped_pages": {"mean": mean}}

    missing = {"value": None, "lo": None, "hi": None, "reason": "n too small: 400 samples, p99 needs >= 1000"}
    classes = {c.value: cls(missing if i % 2 else {"value": 5.0, "lo": 4.0, "hi": 6.0}) for i, c in enumerate(CLASSES)}
    summary = json.loads(json.dumps({"baseline": "none", "swap": {"kind": "zram"}, "pressure_pct": 30, "reps": 1,
                                     "variants": {"none": {"classes": classes}}}))
    out = plot_summary(summary, tmp_path / "vm.png")
    assert out.stat().st_size > 0
