"""What a report is built from: one or more suites (or loose runs), grouped by run kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Hashable

from harness.report.document import Document
from harness.results import ResultStore, Run


@dataclass
class Suite:
    """One column of a report: a `kvds run` suite, or a set of loose runs given on the command line."""

    label: str
    run: Run | None
    stages: list[dict] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Run]:
        return [r for r in self.runs if r.meta.get("kind") == kind]

    def latest(self, kind: str) -> Run | None:
        """The newest finished run of a kind (a run without summary.json was interrupted)."""
        runs = self.finished(kind)
        return runs[-1] if runs else None

    def finished(self, kind: str) -> list[Run]:
        """The runs of a kind that finished (wrote summary.json), in id order."""
        return [r for r in self.of_kind(kind) if (r.path / "summary.json").exists()]

    def latest_by(self, kind: str, key: Callable[[Run], Hashable]) -> dict[Hashable, Run]:
        """The newest finished run of a kind per value of `key` (say, per device: this host's disk and the guest
        lab's model device, which one suite both benches), keys in the order their first run came."""
        newest: dict[Hashable, Run] = {}
        for run in self.finished(kind):  # id order: the last run of each key wins
            newest[key(run)] = run
        return newest

    @property
    def environment(self) -> dict:
        src = self.run or (self.runs[0] if self.runs else None)
        return src.meta.get("environment", {}) if src else {}


@dataclass
class ReportContext:
    suites: list[Suite]
    doc: Document
    figdir: Path
    summary: dict = field(default_factory=dict)  # each section's figures by suite, written as report.json
    headlines: dict[str, dict[str, object]] = field(default_factory=dict)  # figure -> {suite label: value}
    verdicts: dict[str, dict[str, str]] = field(default_factory=dict)  # suite label -> {goal: verdict line}

    def fig(self, name: str) -> Path:
        return self.figdir / name

    def latest(self, kind: str) -> list[tuple[Suite, Run]]:
        """Each suite's newest finished run of a kind, for the suites that have one (a section's usual loop)."""
        return [(s, r) for s in self.suites if (r := s.latest(kind)) is not None]

    def headline(self, figure: str, suite_label: str, value: object) -> None:
        """A figure for the Summary table at the top of the report (one row per figure, one column per suite,
        rows in the order the sections first give them): the core renders what the tracks hand it and reads no
        track's keys. None is missing data."""
        self.headlines.setdefault(figure, {})[suite_label] = value

    def verdict(self, suite_label: str, what: str, line: str) -> None:
        """A goal's verdict line with its interval, as the section printed it: repeated under the Summary table
        and stored in report.json, from which `kvds run` prints it (never a second judgement)."""
        self.verdicts.setdefault(suite_label, {})[what] = line


def load_suites(refs: list[str], store: ResultStore) -> list[Suite]:
    """Each ref is a suite run (its stage runs come along) or a loose run (grouped into one column)."""
    suites: list[Suite] = []
    loose: list[Run] = []
    for ref in refs:
        run = store.get(ref)
        if run.meta.get("kind") == "suite":
            stages = run.read_json("stages").get("stages", []) if (run.path / "stages.json").exists() else []
            members = []
            for st in stages:
                for rid in st.get("runs", []):
                    p = run.path.parent / rid
                    if (p / "meta.json").exists():
                        members.append(Run(p))
            env = run.meta.get("environment", {})
            suites.append(Suite(f"{env.get('host', '?')} {run.run_id[:15]}", run, stages, members))
        else:
            loose.append(run)
    if loose:
        env = loose[0].meta.get("environment", {})
        suites.append(Suite(f"{env.get('host', '?')} (runs)", None, [], loose))
    return suites
