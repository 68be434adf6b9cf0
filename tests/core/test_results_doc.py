"""docs/results.md is generated from the summary dataclasses (harness/results_doc.py): it must be
what the generator prints now, so a summary field added, renamed or removed without regenerating the document
fails here; every key must say what it means."""

from __future__ import annotations

import dataclasses
import difflib

from harness import results_doc
from harness.paths import repo_root

DOC = repo_root() / "docs" / "results.md"
REGENERATE = ".venv/bin/python -m harness.results_doc > docs/results.md"


def test_docs_results_md_is_what_the_summaries_say() -> None:
    want = results_doc.document(*results_doc.registered())
    have = DOC.read_text()
    diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "docs/results.md", "generated"))
    assert have == want, f"docs/results.md is out of date; run: {REGENERATE}\n{diff[:3000]}"


def test_every_registered_summary_is_a_dataclass_whose_keys_all_have_a_meaning() -> None:
    summaries, untyped = results_doc.registered()
    assert summaries
    for name, cls in summaries:
        assert dataclasses.is_dataclass(cls), name
        blank = [k for k, _, _, meaning in results_doc.rows(cls) if not meaning]
        assert not blank, f"{name}: keys without a meaning (a comment on the field's line, or metadata['doc']): {blank}"
    assert not {n.split(".")[0] for n, _ in summaries} & set(untyped)


@dataclasses.dataclass(frozen=True)
class _Before:
    """A summary."""
    reads: int                   # reads completed
    wait_ms: float               # time waited


@dataclasses.dataclass(frozen=True)
class _After:
    """A summary."""
    reads: int                   # reads completed
    wait_ms: float               # time waited
    freed: int = dataclasses.field(default=0, metadata={"unit": "pages", "doc": "pages given back"})  # not this


def test_a_field_added_changes_the_document_with_its_type_unit_and_meaning() -> None:
    before = results_doc.document([("t.v", _Before)], ["io"])
    after = results_doc.document([("t.v", _After)], ["io"])
    assert before != after
    assert "| `wait_ms` | `float` | ms | time waited |" in before
    assert "| `freed` | `int` | pages | pages given back |" in after       # metadata wins over the comment
    assert "## Tracks whose summaries are still untyped dicts" in after and "- `io`" in after


def test_comments_are_read_per_field_and_only_from_field_lines() -> None:
    assert results_doc.comments(_Before) == {"reads": "reads completed", "wait_ms": "time waited"}


def test_a_stored_validate_summary_is_read_back_typed() -> None:
    """The report reads summary.json through ValidateSummary.from_json: the keys written come back as fields, a
    key an older kvds did not write is None, a key no field has is dropped."""
    from qemu_validation.validate_run import ValidateSummary
    s = ValidateSummary.from_json({"ok": True, "splats": 0, "tests": {"planned": 3}, "gone_key": 1})
    assert s.ok is True and s.splats == 0 and s.tests == {"planned": 3} and s.malformed_writes is None
    assert set(s.as_dict()) == {f.name for f in dataclasses.fields(ValidateSummary)}
