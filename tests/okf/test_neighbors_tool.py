"""get_neighbors handler over real bundles written to tmp_path."""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools.query import get_neighbors
from tool_args import tool_args


def write_bundle(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return str(root)


def call(bundle, concept_id, direction="both", kinds=None, limit=20, **kw):
    args = tool_args("get_neighbors", bundle_path=bundle, concept_id=concept_id, direction=direction, kinds=kinds,
                     limit=limit, as_of=kw.get("as_of"), temporal_profile=kw.get("temporal_profile"))
    return get_neighbors(args, CallContext())


EXAMPLE = {
    "a.md": "---\ntype: Note\nparts:\n  - id: section\nsources:\n  - id: doc\n    resource: https://example.com/doc\n---\n"
            "See [To B](b.md#part) and [Broken](missing.md).\nCode `[fake](ghost.md)` is not a link.\n"
            "```\n[fenced](b.md)\n```\n",
    "b.md": "---\ntype: Note\nrelations:\n  uses:\n    - target: a#section\n    - target: nowhere\n---\nBack [To A](/a.md#section).\n",
    "index.md": "# Index\n\n- [A](a.md)\n- [B](b.md)\n",
}


def edges(out):
    return [(e["kind"], e["from"], e["to"], e["relation_type"]) for e in out["edges"]]


def test_contract_example_both(tmp_path):
    out = call(write_bundle(tmp_path, EXAMPLE), "a").structured
    assert edges(out) == [
        ("navigation", "a", "b", None),
        ("navigation", "b", "a", None),
        ("relation", "b", "a#section", "uses"),
    ]
    assert out["total"] == 3 and out["truncated"] is False
    assert out["sources"] == [{"id": "doc", "resource": "https://example.com/doc", "title": ""}]
    assert list(out) == ["concept", "temporal_profile", "as_of", "direction", "kinds", "total", "truncated", "edges", "sources"]
    assert out["edges"][2]["source"]["id"] == "b" and out["edges"][2]["target"]["id"] == "a"


def test_contract_example_in(tmp_path):
    out = call(write_bundle(tmp_path, EXAMPLE), "a", direction="in").structured
    assert out["total"] == 2 and out["sources"] == []


def test_out_and_kinds_echo(tmp_path):
    out = call(write_bundle(tmp_path, EXAMPLE), "a", direction="out", kinds=["source", "navigation"]).structured
    assert out["kinds"] == ["navigation", "source"]
    assert edges(out) == [("navigation", "a", "b", None)]


def test_truncation_keeps_total(tmp_path):
    out = call(write_bundle(tmp_path, EXAMPLE), "a", limit=1)
    assert out.structured["total"] == 3 and out.structured["truncated"] is True
    assert len(out.structured["edges"]) == 1
    assert json.loads(out.text) == out.structured


def test_hash_in_concept_id_is_escaped_in_relation_refs(tmp_path):
    bundle = write_bundle(tmp_path, {
        "hash#name.md": "---\ntype: Note\n---\nbody\n",
        "src.md": "---\ntype: Note\nrelations:\n  mentions:\n    - target: 'hash\\#name'\n---\n",
    })
    out = call(bundle, "src", direction="out").structured
    assert edges(out) == [("relation", "src", "hash\\#name", "mentions")]
    assert out["edges"][0]["target"]["id"] == "hash#name"


def test_unknown_and_non_canonical_ids(tmp_path):
    bundle = write_bundle(tmp_path, EXAMPLE)
    with pytest.raises(ToolError) as err:
        call(bundle, "zzz")
    assert err.value.code == "concept_not_found"
    for bad in ["a.md", "/a", " a", "index", "x:y"]:
        with pytest.raises(ToolError) as err:
            call(bundle, bad)
        assert err.value.code == "invalid_request", bad


def test_more_than_100_sources_is_resource_limit(tmp_path):
    sources = "".join(f"  - id: s{i}\n    resource: https://e.x/{i}\n" for i in range(101))
    bundle = write_bundle(tmp_path, {"a.md": f"---\ntype: Note\nsources:\n{sources}---\n"})
    with pytest.raises(ToolError) as err:
        call(bundle, "a")
    assert err.value.code == "resource_limit"
    assert call(bundle, "a", direction="in").structured["sources"] == []


IDS = ["a", "b", "c", "d/e"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(IDS + ["gone"])), max_size=25),
    st.sampled_from(["in", "out", "both"]),
    st.integers(1, 100),
)
def test_property_sorted_bounded_deterministic(tmp_path_factory, links, direction, limit):
    root = tmp_path_factory.mktemp("n")
    bodies = {cid: [] for cid in IDS}
    for src, dst in links:
        bodies[src].append(f"[x](/{dst}.md)")
    bundle = write_bundle(root, {f"{cid}.md": "---\ntype: Note\n---\n" + "\n".join(b) + "\n" for cid, b in bodies.items()})
    first = call(bundle, "a", direction=direction, limit=limit)
    s = first.structured
    assert len(s["edges"]) <= limit and s["total"] >= len(s["edges"])
    assert s["truncated"] == (s["total"] > len(s["edges"]))
    keys = [(e["kind"], e["from"].encode(), e["to"].encode()) for e in s["edges"]]
    assert keys == sorted(keys)
    want = sum(1 for src, dst in links if dst != "gone" and (
        (direction in ("out", "both") and src == "a") or (direction in ("in", "both") and dst == "a")))
    assert s["total"] == want
    assert call(bundle, "a", direction=direction, limit=limit).text == first.text


def test_hub_with_many_edges_is_bounded_but_counted(tmp_path):
    files = {f"n{i:04d}.md": "---\ntype: Note\n---\n[hub](hub.md)\n" for i in range(150)}
    files["hub.md"] = "---\ntype: Note\n---\n" + " ".join(f"[x](n{i:04d}.md)" for i in range(150)) + "\n"
    bundle = write_bundle(tmp_path, files)
    out = call(bundle, "hub", limit=100).structured
    assert out["total"] == 300 and out["truncated"] is True and len(out["edges"]) == 100
    assert [e["from"] for e in out["edges"][:2]] == ["hub", "hub"]
    assert call(bundle, "hub", direction="in").structured["total"] == 150


def test_relation_from_a_fragment_keeps_the_escaped_source_ref(tmp_path):
    bundle = write_bundle(tmp_path, {
        "hash#name.md": "---\ntype: Note\nparts:\n  - id: sec\n    relations:\n      uses:\n        - target: b\n---\n",
        "b.md": "---\ntype: Note\n---\n",
    })
    out = call(bundle, "b", direction="in").structured
    assert edges(out) == [("relation", "hash\\#name#sec", "b", "uses")]
    assert out["edges"][0]["source"]["id"] == "hash#name"
