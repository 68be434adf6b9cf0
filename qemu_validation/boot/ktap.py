"""Parse KTAP (the kernel's test output format, Documentation/dev-tools/ktap.rst) and summarize it.

The in-guest validator prints KTAP version 1: a plan, one result line per test, and `# key=value` diagnostics
that the summary turns into numbers (how many malformed writes were tried, how many got the wrong errno).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

_VERSION = re.compile(r"^\s*(KTAP|TAP) version (\d+)\s*$")
_PLAN = re.compile(r"^\s*1\.\.(\d+)\s*$")
_RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+)(?: -)?(?: ([^#]*?))?\s*(?:#\s*(?:(SKIP|TODO|XFAIL)\b)?\s*(.*))?$",
                     re.IGNORECASE)
_DIAG = re.compile(r"^\s*#\s?(.*)$")
_KV = re.compile(r"\b([A-Za-z_][\w.]*)=(-?\d+)\b")


@dataclass
class TestResult:
    number: int
    name: str
    ok: bool
    directive: str = ""
    reason: str = ""
    diagnostics: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> bool:
        return self.directive.upper() == "SKIP"


@dataclass
class Report:
    version: int | None = None
    planned: int | None = None
    results: list[TestResult] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.ok and not r.skipped)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.ok)

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.results if r.skipped)

    @property
    def complete(self) -> bool:
        return self.planned is not None and len(self.results) == self.planned and not self.problems

    @property
    def ok(self) -> bool:
        return self.complete and self.failed == 0

    def summary(self) -> dict[str, Any]:
        """The summary as stored (validate's `tests`, `kselftest`, `kunit`): KtapSummary's fields, key by key."""
        return asdict(KtapSummary(
            planned=self.planned, ran=len(self.results), passed=self.passed, failed=self.failed,
            skipped=self.skipped, complete=self.complete, problems=list(self.problems),
            failures=[{"number": r.number, "name": r.name, "reason": r.reason, "diagnostics": r.diagnostics}
                      for r in self.results if not r.ok],
            counters=dict(self.counters)))


@dataclass(frozen=True)
class KtapSummary:
    """One KTAP document summed up: validate's `tests` (the validator), `kselftest` and `kunit` in summary.json."""
    planned: int | None          # tests the plan line announced (None: the document had no plan line)
    ran: int                     # result lines seen
    passed: int                  # "ok" results that were not skipped
    failed: int                  # "not ok" results
    skipped: int                 # "ok ... # SKIP" results
    complete: bool               # a plan, one result per planned test and no problem
    problems: list[str]          # what made the document malformed (a second plan line, a result out of order)
    failures: list[dict[str, Any]]  # each failed test: number, name, reason, diagnostics (its "# " lines)
    counters: dict[str, int]     # the "# key=value" diagnostics summed (malformed_writes, fuzz_ms, ...)


def parse(text: str) -> Report:
    """Parse the top level of a KTAP document; nested (indented) subtests are folded into their parent's lines."""
    rep = Report()
    pending: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line:
            continue
        if m := _VERSION.match(line):
            if rep.version is None:
                rep.version = int(m.group(2))
            continue
        if line.startswith((" ", "\t")):
            pending.append(line.strip())
            continue
        if m := _PLAN.match(line):
            if rep.planned is not None:
                rep.problems.append(f"second plan line: {line!r}")
            rep.planned = int(m.group(1))
            continue
        if m := _RESULT.match(line):
            number = int(m.group(3))
            expected = len(rep.results) + 1
            if number != expected:
                rep.problems.append(f"test {number} out of order (expected {expected})")
            rep.results.append(TestResult(number, (m.group(4) or "").strip(), m.group(2) == "ok",
                                          (m.group(5) or "").upper() if m.group(5) else "",
                                          (m.group(6) or "").strip(), pending))
            pending = []
            continue
        if m := _DIAG.match(line):
            body = m.group(1)
            pending.append(body)
            for k, v in _KV.findall(body):
                rep.counters[k] = rep.counters.get(k, 0) + int(v)
            continue
        rep.problems.append(f"unparsable line: {line[:80]!r}")
    if rep.version is None:
        rep.problems.append("no KTAP version line")
    if rep.planned is None:
        rep.problems.append("no plan line (1..N): the test program did not finish")
    elif len(rep.results) != rep.planned:
        rep.problems.append(f"planned {rep.planned} tests, ran {len(rep.results)}")
    return rep
