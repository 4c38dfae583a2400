"""Property: an edit never disturbs bytes it does not name.

Random frontmatter is assembled from opaque chunks (unknown keys in every YAML style,
comments, blank lines) around the standard families; after any operation every opaque chunk
is still present verbatim and in order, the body is byte-identical, and the edited family
reads back as the desired state.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.okf.parsing.frontmatter import load_yaml_mapping
from knowspec.impl.okf.write.document import split_document
from knowspec.impl.okf.write.patch import apply_concept_operation

OPAQUE = [
    "x-plain: hello world\n",
    "x-single: 'it''s'\n",
    'x-double: "tab\\tquoted"  # trailing comment\n',
    "x-flow: {a: 1, b: [2, 3]}\n",
    "x-block:\n  nested: value\n  # inner comment\n  list:\n    - one\n    - two\n",
    "x-literal: |\n  line one\n\n  line three\n",
    "# a full-line comment\n",
    "\n",
    "x-date: 2026-01-01\n",
    "x-int: 0o17\n",
]
FAMILIES = [
    "status: draft\n",
    "sources:\n  - id: s1\n    resource: https://one\n    x-k: keep  # c\n  - resource: https://anon\n",
    "verified:\n  by: human:ana\n  at: 2026-07-01T09:00:00Z\n",
    "generated: {by: 'human:old', at: 2026-01-01T00:00:00Z}\n",
]
OPS = [
    {"kind": "set_lifecycle", "concept_id": "c", "lifecycle": {"status": "stable", "stale_after": "2030-01-01"}},
    {"kind": "set_generated", "concept_id": "c", "generated": {"by": "process:new"}},
    {"kind": "put_source", "concept_id": "c", "source": {"id": "s1", "resource": "https://changed", "title": "T"}},
    {"kind": "put_source", "concept_id": "c", "source": {"id": "s2", "resource": "https://two"}},
    {"kind": "remove_source", "concept_id": "c", "source_id": "s1"},
    {"kind": "ensure_verification", "concept_id": "c", "verification": {"by": "process:ci", "at": "2026-08-01T00:00:00Z"}},
    {"kind": "set_usage_window", "concept_id": "c", "usage_window": {"from": "2026-01-01", "to": "2026-02-01"}},
]


def _desired(fm: dict, op: dict) -> None:
    kind = op["kind"]
    if kind == "set_lifecycle":
        assert fm["status"] == "stable" and fm["stale_after"] == "2030-01-01"
    elif kind == "set_generated":
        assert dict(fm["generated"]) == {"by": "process:new"}
    elif kind == "put_source":
        mine = [s for s in fm["sources"] if s.get("id") == op["source"]["id"]]
        assert len(mine) == 1 and mine[0]["resource"] == op["source"]["resource"]
    elif kind == "remove_source":
        assert all(s.get("id") != "s1" for s in fm.get("sources", []))
    elif kind == "ensure_verification":
        events = fm["verified"] if isinstance(fm["verified"], list) else [fm["verified"]]
        assert sum(str(e["by"]) == "process:ci" for e in events) == 1
    elif kind == "set_usage_window":
        assert dict(fm["usage_window"]) == {"from": "2026-01-01", "to": "2026-02-01"}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(OPAQUE), min_size=0, max_size=6),
    st.lists(st.sampled_from(FAMILIES), min_size=0, max_size=4, unique=True),
    st.randoms(use_true_random=False),
    st.sampled_from(OPS),
    st.sampled_from(["\nBody\n", "", "# T\n\n```sql\nselect 1\n```\n", "no newline"]),
)
def test_edits_keep_every_unnamed_byte(opaque, families, rnd, op, body):
    chunks = ["type: Note\n"] + [("o", c) for c in opaque] + [("f", f) for f in families]
    head, rest = chunks[0], chunks[1:]
    rnd.shuffle(rest)
    seen_keys: set[str] = set()
    ordered = []
    for tag, chunk in rest:  # drop duplicate keys (those are refused by design)
        key = chunk.split(":", 1)[0] if not chunk.startswith(("#", "\n")) else None
        if key and key in seen_keys:
            continue
        seen_keys.add(key or "")
        ordered.append((tag, chunk))
    fm = head + "".join(c for _, c in ordered)
    doc = split_document(("---\n" + fm + "---\n" + body).encode())
    if op["kind"] == "remove_source" and not any(c.startswith("sources") for _, c in ordered):
        return
    new = apply_concept_operation(doc, op)
    assert new.body == doc.body and new.open_line == doc.open_line and new.close_line == doc.close_line
    pos = 0
    for tag, chunk in ordered:
        if tag == "o" and chunk.strip():
            found = new.frontmatter.find(chunk, pos)
            assert found >= 0, f"opaque chunk lost or reordered: {chunk!r}"
            pos = found + len(chunk)
    _desired(load_yaml_mapping(new.frontmatter), op)
