"""The typed summaries of the core's commands: what each prints with --json and what `render` shows a person."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import StoredSummary


@dataclass
class DoctorSummary(StoredSummary):
    """`kvds doctor`: every probed capability with its status and reason."""
    capabilities: list[dict[str, str]] = field(default_factory=list)  # name, status, reason, area (+ traceback)

    def errors(self) -> list[str]:
        """The capabilities whose probe failed inside kvds (status "error")."""
        return [c["name"] for c in self.capabilities if c["status"] == "error"]


@dataclass
class MapSummary(StoredSummary):
    """`kvds map`: one mapping with the host's status of each capability it needs, or (--list) every mapping."""
    OMIT_WHEN_NONE = ("mappings", "name", "description", "classes", "capabilities", "capability_status")
    mappings: dict[str, str] | None = None  # --list: mapping name -> description
    name: str | None = None  # the mapping's name (a TOML file's stem for a path)
    description: str | None = None  # what the mapping does, from its TOML
    classes: dict[str, dict[str, Any]] | None = None  # intent class -> its mechanisms
    capabilities: dict[str, list[str]] | None = None  # capability -> the intent classes that need it
    capability_status: dict[str, dict[str, str]] | None = None  # capability -> kvds doctor's row


@dataclass
class ReportSummary(StoredSummary):
    """`kvds report`: the files written."""
    paths: dict[str, str] = field(default_factory=dict)  # markdown, html, json -> path


@dataclass
class RestoreSummary(StoredSummary):
    """`kvds restore`: each journal replayed, what it undid and what it could not."""
    journals: list[dict[str, Any]] = field(default_factory=list)  # journal, undone, failed

    def failed(self) -> bool:
        return any(j["failed"] for j in self.journals)


@dataclass
class ResultsListSummary(StoredSummary):
    """`kvds results list`: the stored runs."""
    runs: list[dict[str, Any]] = field(default_factory=list)  # run_id, kind, path


@dataclass
class ResultsShowSummary(StoredSummary):
    """`kvds results show`: one stored run."""
    run_id: str = ""  # the run's directory name
    meta: dict[str, Any] = field(default_factory=dict)  # the run's meta.json
    summary: dict[str, Any] = field(default_factory=dict)  # the run's summary.json
    samples: list[str] = field(default_factory=list)  # names of its samples/*.npy


@dataclass
class RunSummary(StoredSummary):
    """`kvds run`: the suite's stages, its report and the report's verdicts."""
    suite: str = ""  # the suite's run id
    path: str = ""  # the suite's run directory
    seconds: float = 0.0  # wall time of the whole suite
    stages: list[dict[str, Any]] = field(default_factory=list)  # harness/suite.py StageOutcome, one per stage
    report: dict[str, str] = field(default_factory=dict)  # markdown, html, json -> path ({} with --skip report)
    verdicts: list[str] = field(default_factory=list)  # the report's goal verdicts, one line each

    def failed(self) -> list[dict[str, Any]]:
        return [s for s in self.stages if s["status"] == "failed"]


@dataclass
class TraceStatsSummary(StoredSummary):
    """`kvds trace stats`: a trace's size and its events per type and per intent class."""
    file: str = ""  # the trace read
    events: int = 0  # events in it
    requests: int = 0  # distinct request ids
    unique_blocks: int = 0  # distinct KV blocks
    last_step: int = 0  # the highest decode step
    event_types: dict[str, int] = field(default_factory=dict)  # event type -> count
    intent_classes: dict[str, int] = field(default_factory=dict)  # every intent class, in IntentClass order
