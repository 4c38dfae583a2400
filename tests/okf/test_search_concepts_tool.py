"""search_concepts handler over real bundles written to tmp_path."""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools.query import search_concepts
from knowspec.impl.rules.text import case_fold
from tool_args import tool_args


def write_bundle(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return str(root)


def concept(title=None, description=None, tags=None, body="", extra=""):
    lines = ["---", "type: Note"]
    if title is not None:
        lines.append(f"title: {json.dumps(title)}")
    if description is not None:
        lines.append(f"description: {json.dumps(description)}")
    if tags is not None:
        lines.append(f"tags: {json.dumps(tags)}")
    if extra:
        lines.append(extra)
    return "\n".join(lines + ["---", body]) + "\n"


def call(bundle, query, limit=20, **kw):
    args = tool_args("search_concepts", bundle_path=bundle, query=query, limit=limit,
                     as_of=kw.get("as_of"), temporal_profile=kw.get("temporal_profile"))
    return search_concepts(args, CallContext())


def test_unicode_folding_example(tmp_path):
    bundle = write_bundle(tmp_path, {
        "cafe.md": concept(title="Café"),
        "second.md": concept(body="the CAFE\u0301 body"),
        "third.md": concept(title="café"),
    })
    out = call(bundle, "cafe\u0301", limit=2).structured
    assert out["total"] == 3 and out["truncated"] is True
    assert [(h["concept"]["id"], h["match"]) for h in out["hits"]] == [("cafe", "title"), ("third", "title")]


def test_priority_example(tmp_path):
    bundle = write_bundle(tmp_path, {
        "needle.md": concept(),
        "title-b.md": concept(title="A Needle"),
        "title-a.md": concept(title="needle"),
        "description.md": concept(description="has NEEDLE"),
        "tag.md": concept(tags=["x", "needles"]),
        "body.md": concept(body="text with needle"),
        "other.md": concept(title="nothing"),
    })
    out = call(bundle, "needle").structured
    assert [h["concept"]["id"] for h in out["hits"]] == ["needle", "title-a", "title-b", "description", "tag", "body"]
    assert [h["match"] for h in out["hits"]] == ["id", "title", "title", "description", "tags", "body"]


def test_query_cannot_span_tags_and_type_is_not_searched(tmp_path):
    bundle = write_bundle(tmp_path, {"x.md": concept(tags=["foo", "bar"])})
    assert call(bundle, "foo\nbar").structured["total"] == 0
    assert call(bundle, "Note").structured["total"] == 0


def test_output_shape_card_and_text_fallback(tmp_path):
    bundle = write_bundle(tmp_path, {"ops/retry.md": concept(
        title="Retry", tags=["ops"], extra="stale_after: 2026-12-31\nverified: {by: \"human:ana\", at: 2026-07-01T09:00:00Z}")})
    out = call(bundle, "retry", as_of="2027-01-01")
    s = out.structured
    assert list(s) == ["query", "temporal_profile", "as_of", "total", "truncated", "hits"]
    assert s["as_of"] == "2027-01-01" and s["temporal_profile"] == "date-3fcbb9f"
    card = s["hits"][0]["concept"]
    assert card == {
        "id": "ops/retry", "path": "ops/retry.md", "type": "Note", "title": "Retry", "description": "",
        "tags": ["ops"], "status": "stable", "trust": "human-reviewed", "stale": True,
        "stale_after": "2026-12-31",
        "status_state": {"present": False, "valid": True, "raw": None, "effective": "stable"},
    }
    assert json.loads(out.text) == s


def test_stale_is_null_without_as_of_or_valid_stale_after(tmp_path):
    bundle = write_bundle(tmp_path, {
        "a.md": concept(title="x", extra="stale_after: 2026-12-31"),
        "b.md": concept(title="x", extra="stale_after: soon"),
    })
    cards = {h["concept"]["id"]: h["concept"] for h in call(bundle, "x").structured["hits"]}
    assert cards["a"]["stale"] is None and cards["a"]["stale_after"] == "2026-12-31"
    cards = {h["concept"]["id"]: h["concept"] for h in call(bundle, "x", as_of="2026-12-30").structured["hits"]}
    assert cards["a"]["stale"] is False
    assert cards["b"]["stale"] is None and cards["b"]["stale_after"] is None


def test_instant_profile_echo_and_comparison(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": concept(title="x", extra='stale_after: "2026-09-23T18:00:00.123456789+07:00"')})
    out = call(bundle, "x", as_of="2026-09-23T11:00:00.123456789+00:00", temporal_profile="instant-0b87c52").structured
    assert out["as_of"] == "2026-09-23T11:00:00.123456789Z"
    assert out["hits"][0]["concept"]["stale"] is True
    out = call(bundle, "x", as_of="2026-09-23T11:00:00.12345678Z", temporal_profile="instant-0b87c52").structured
    assert out["hits"][0]["concept"]["stale"] is False


@pytest.mark.parametrize("as_of", ["2026-7-1", "2026-02-31", "2026-07-01T00:00:00Z"])
def test_bad_date_as_of_is_invalid_request(tmp_path, as_of):
    bundle = write_bundle(tmp_path, {"a.md": concept(title="x")})
    with pytest.raises(ToolError) as err:
        call(bundle, "x", as_of=as_of)
    assert err.value.code == "invalid_request"


def test_blank_query_is_refused_and_the_longest_one_is_answered(tmp_path):
    """513 characters never reach the handler: tests/server/test_schema_enforced_inputs.py."""
    bundle = write_bundle(tmp_path, {"a.md": concept(title="x")})
    with pytest.raises(ToolError) as err:
        call(bundle, "   ")
    assert err.value.code == "schema_validation"
    assert call(bundle, "x" * 512).structured["total"] == 0


def test_parse_error_anywhere_rejects_the_call(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": concept(title="x"), "bad.md": "---\ntype: [\n---\n"})
    with pytest.raises(ToolError) as err:
        call(bundle, "x")
    assert err.value.code == "operation_rejected"


WORD = st.text(alphabet="aAbé\u0301ßs", min_size=0, max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.text(alphabet="abcs", min_size=1, max_size=3),
                    st.tuples(WORD, WORD, st.lists(WORD.filter(bool), max_size=2), WORD), max_size=8),
    st.text(alphabet="aAbsé", min_size=1, max_size=2),
    st.integers(1, 100),
)
def test_property_order_bounds_and_determinism(tmp_path_factory, rows, query, limit):
    root = tmp_path_factory.mktemp("b")
    files = {f"{cid}.md": concept(title=t or None, description=d or None, tags=tags or None, body=b)
             for cid, (t, d, tags, b) in rows.items()}
    bundle = write_bundle(root, files)
    first = call(bundle, query, limit)
    s = first.structured
    hits = s["hits"]
    assert len(hits) <= limit and s["total"] >= len(hits)
    assert s["truncated"] == (s["total"] > len(hits))
    rank = {"id": 6, "title": 5, "description": 4, "tags": 3, "body": 1}
    keys = [(-rank[h["match"]], h["concept"]["id"].encode()) for h in hits]
    assert keys == sorted(keys)
    q = case_fold(query)
    expected_total = sum(
        1 for cid, (t, d, tags, b) in rows.items()
        if any(q in case_fold(x) for x in [cid, t, d, b, *tags])
    )
    assert s["total"] == expected_total
    second = call(bundle, query, limit)
    assert second.text == first.text


def test_cancelled_call_fails_without_partial_result(tmp_path):
    from knowspec.impl.okf.tools.query import get_neighbors, get_semantic_graph, search_sections

    bundle = write_bundle(tmp_path, {"a.md": concept(title="x")})
    calls = [
        (search_concepts, tool_args("search_concepts", bundle_path=bundle, query="x", limit=5)),
        (get_neighbors, tool_args("get_neighbors", bundle_path=bundle, concept_id="a", limit=5)),
        (search_sections, tool_args("search_sections", bundle_path=bundle, query="x", limit=5)),
        (get_semantic_graph, tool_args("get_semantic_graph", bundle_path=bundle)),
    ]
    for handler, args in calls:
        ctx = CallContext()
        ctx.cancel_event.set()
        with pytest.raises(ToolError) as err:
            handler(args, ctx)
        assert err.value.code == "operation_cancelled" and err.value.retryable is True
