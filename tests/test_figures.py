"""Figures owed by runs made in the guest lab are drawn by the host that files them (harness/figures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import figures
from harness.results import ResultStore


def render(summary: dict, path: Path) -> None:
    path.write_text(json.dumps(summary))


def render_broken(summary: dict, path: Path) -> None:
    raise ValueError("no axes for this summary")


def test_deferred_then_drawn_on_filing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = ResultStore(tmp_path).new_run("x", {})
    run.write_summary({"a": 1})
    monkeypatch.setenv(figures.DEFER_ENV, "1")
    assert figures.draw(run, "a.png", "tests.test_figures:render", {"a": 1}) == "deferred"
    assert figures.draw(run, "b.png", "tests.test_figures:render_broken", {"a": 1}) == "deferred"
    assert not (run.path / "a.png").exists()
    assert run.read_json("figures-owed") == {"a.png": "tests.test_figures:render",
                                             "b.png": "tests.test_figures:render_broken"}
    done = figures.draw_owed(run)
    assert done == {"a.png": "drawn", "b.png": "ValueError: no axes for this summary"}
    assert json.loads((run.path / "a.png").read_text()) == {"a": 1}
    assert run.read_json("figures-owed") == {"b.png": "tests.test_figures:render_broken"}  # still owed, says why


def test_drawn_at_once_without_the_guest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(figures.DEFER_ENV, raising=False)
    run = ResultStore(tmp_path).new_run("x", {})
    assert figures.draw(run, "a.png", "tests.test_figures:render", {"b": 2}) == "drawn"
    assert (run.path / "a.png").exists() and figures.draw_owed(run) == {}
