"""Editor corner cases: keys on dash lines, nested inserts, indentation, comments, CRLF."""

from __future__ import annotations

import pytest

from knowspec.impl.okf.write.document import Document, split_document
from knowspec.impl.okf.write.patch import apply_concept_operation
from knowspec.impl.okf.write.yaml_text import YamlRejected


def _edit(frontmatter: str, op: dict, nl: str = "\n") -> str:
    raw = ("---\n" + frontmatter + "---\nbody\n").replace("\n", nl).encode()
    doc = apply_concept_operation(split_document(raw), dict(op, concept_id="c"))
    return doc.frontmatter


def test_removing_the_first_key_of_an_item_pulls_the_next_key_onto_the_dash():
    fm = "type: N\nsources:\n  - title: T\n    resource: r\n    id: x\n"
    out = _edit(fm, {"kind": "put_source", "source": {"id": "x", "resource": "r"}})
    assert out == "type: N\nsources:\n  - resource: r\n    id: x\n"


def test_insert_into_a_middle_item_stays_inside_that_item():
    fm = "type: N\nsources:\n  - id: a\n    resource: ra\n  # between\n  - id: b\n    resource: rb\n"
    out = _edit(fm, {"kind": "put_source", "source": {"id": "a", "resource": "ra", "title": "A"}})
    assert out == "type: N\nsources:\n  - id: a\n    resource: ra\n    title: A\n  # between\n  - id: b\n    resource: rb\n"


def test_unindented_sequence_style_is_followed_when_appending():
    fm = "type: N\nsources:\n- id: a\n  resource: ra\n"
    out = _edit(fm, {"kind": "put_source", "source": {"id": "b", "resource": "rb"}})
    assert out == fm + "- id: b\n  resource: rb\n"


def test_quoted_key_and_trailing_comments_survive_an_unrelated_insert():
    fm = '"type": N\n# trailing comment\n\n'
    out = _edit(fm, {"kind": "set_lifecycle", "lifecycle": {"status": "stable", "stale_after": None}})
    assert out == '"type": N\nstatus: stable\n# trailing comment\n\n'


def test_crlf_is_used_for_new_nested_lines():
    fm = "type: N\nverified:\n  by: human:a\n  at: 2026-01-01T00:00:00Z\n"
    out = _edit(fm, {"kind": "ensure_verification", "verification": {"by": "human:b", "at": "2026-02-01T00:00:00Z"}}, "\r\n")
    assert "\n" not in out.replace("\r\n", "")
    assert out.startswith("type: N\r\nverified:\r\n  - by: human:a\r\n    at: 2026-01-01T00:00:00Z\r\n  - by: human:b\r\n")


def test_verification_recorded_twice_is_ambiguous_to_remove():
    fm = ("type: N\nverified:\n  - by: human:a\n    at: 2026-01-01T00:00:00Z\n"
          "  - by: human:a\n    at: 2026-01-01T00:00:00+00:00\n")
    with pytest.raises(Exception) as err:
        _edit(fm, {"kind": "remove_verification", "verification": {"by": "human:a", "at": "2026-01-01T00:00:00Z"}})
    assert getattr(err.value, "code", "") == "ambiguous_verification"


def test_inline_computation_replaces_the_single_existing_fence_only():
    raw = b"---\ntype: N\n---\n# Computation\n\nIntro.\n\n```sql\nselect 1\n```\n\nOutro.\n"
    op = {"kind": "put_attested_computation", "concept_id": "c", "attested_computation": {
        "mode": "inline", "runtime": "pg", "parameters": [], "inline_computation": "select 2\n",
        "inline_language": "sql", "executor": {"resource": "e", "receipt": ["r"]}, "attester": {"resource": "a"}}}
    doc = apply_concept_operation(split_document(raw), op)
    assert doc.body == "# Computation\n\nIntro.\n\n```sql\nselect 2\n```\n\nOutro.\n"


def test_two_fences_make_an_inline_computation_ambiguous():
    raw = b"---\ntype: N\n---\n```\na\n```\n```\nb\n```\n"
    op = {"kind": "put_attested_computation", "concept_id": "c", "attested_computation": {
        "mode": "inline", "runtime": "pg", "parameters": [], "inline_computation": "x",
        "inline_language": "sql", "executor": {"resource": "e", "receipt": ["r"]}, "attester": {"resource": "a"}}}
    with pytest.raises(Exception) as err:
        apply_concept_operation(split_document(raw), op)
    assert getattr(err.value, "code", "") == "computation_inline_multiple"


def test_document_without_frontmatter_is_refused():
    with pytest.raises(Exception) as err:
        apply_concept_operation(Document("", "", "", "plain body"), {"kind": "set_lifecycle", "concept_id": "c",
                                                                      "lifecycle": {"status": "stable", "stale_after": None}})
    assert getattr(err.value, "code", "") == "concept_frontmatter_missing"


def test_unusual_line_breaks_fail_closed():
    with pytest.raises(YamlRejected):
        _edit("type: N\nx: \"a\u2028b\"\n", {"kind": "set_lifecycle", "lifecycle": {"status": "stable", "stale_after": None}})
