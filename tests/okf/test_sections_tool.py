"""search_sections handler over real bundles written to tmp_path."""

import hashlib
import json

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools.query import search_sections, snapshot_fingerprint
from tool_args import tool_args


def write_bundle(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(root)


def call(bundle, query, limit=20):
    return search_sections(tool_args("search_sections", bundle_path=bundle, query=query, limit=limit), CallContext())


EXAMPLE = "---\ntype: Note\n---\n# Retry\nDeadline permits jitter.\n"


def test_contract_example(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": EXAMPLE, "index.md": "# I\n\n- [a](a.md) jitter deadline\n"})
    out = call(bundle, "jitter deadline", limit=5)
    s = out.structured
    assert list(s) == ["query", "terms", "snapshot_revision", "total", "truncated", "hits"]
    assert s["terms"] == ["jitter", "deadline"] and s["total"] == 1
    hit = s["hits"][0]
    assert {k: hit[k] for k in ("concept_id", "path", "heading", "locator", "line_start", "line_end", "snippet")} == {
        "concept_id": "a", "path": "a.md", "heading": "Retry", "locator": "a.md#L4-L5",
        "line_start": 4, "line_end": 5, "snippet": "# Retry\nDeadline permits jitter.",
    }
    assert hit["content_sha256"] == hashlib.sha256(EXAMPLE.encode()).hexdigest()
    assert hit["matched_terms"] == ["jitter", "deadline"] and hit["score"] > 0
    assert json.loads(out.text) == s


def test_fingerprint_covers_every_file_and_follows_content(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": EXAMPLE, "img.png": b"\x89PNG"})
    first = call(bundle, "retry").structured["snapshot_revision"]
    records = [
        {"path": "a.md", "size": len(EXAMPLE.encode()), "sha256": hashlib.sha256(EXAMPLE.encode()).hexdigest()},
        {"path": "img.png", "size": 4, "sha256": hashlib.sha256(b"\x89PNG").hexdigest()},
    ]
    assert first == hashlib.sha256(json.dumps(records, separators=(",", ":")).encode()).hexdigest()
    (tmp_path / "img.png").write_bytes(b"\x89PNG!")
    assert call(bundle, "retry").structured["snapshot_revision"] != first


def test_go_json_escapes_html_in_fingerprint():
    records = {"a&b<c>.md": b"x"}
    text = json.dumps([{"path": "a\\u0026b\\u003cc\\u003e.md", "size": 1, "sha256": hashlib.sha256(b"x").hexdigest()}],
                      separators=(",", ":")).replace("\\\\u", "\\u")
    assert snapshot_fingerprint(records) == hashlib.sha256(text.encode()).hexdigest()


def test_sharp_s_and_ffi_fold_expansion(tmp_path):
    bundle = write_bundle(tmp_path, {
        "a.md": "---\ntype: Note\ntitle: Straße\n---\nThe oﬃce is here.\n",
        "b.md": "---\ntype: Note\n---\nNothing relevant.\n",
    })
    s = call(bundle, "STRASSE office").structured
    assert s["terms"] == ["strasse", "office"]
    assert [h["concept_id"] for h in s["hits"]] == ["a"]
    assert s["hits"][0]["snippet"] == "The oﬃce is here."


def test_heading_in_fenced_code_is_not_a_section(tmp_path):
    body = "---\ntype: Note\n---\nintro\n\n```\n# not a heading\n```\n\n## Real\nneedle here\n"
    s = call(write_bundle(tmp_path, {"a.md": body}), "needle").structured
    assert [(h["heading"], h["line_start"], h["line_end"]) for h in s["hits"]] == [("Real", 10, 11)]


def test_query_bounds(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": EXAMPLE})
    with pytest.raises(ToolError) as err:
        call(bundle, "-- ..")
    assert err.value.code == "schema_validation"
    with pytest.raises(ToolError) as err:
        call(bundle, " ".join(f"w{i}" for i in range(33)))
    assert err.value.code == "resource_limit"


def test_hits_ordered_by_score_then_id_then_line(tmp_path):
    files = {f"{c}.md": "---\ntype: Note\n---\n# One\nalpha\n\n# Two\nalpha\n" for c in ("b", "a")}
    s = call(write_bundle(tmp_path, files), "alpha", limit=3).structured
    assert [(h["concept_id"], h["line_start"]) for h in s["hits"]] == [("a", 4), ("a", 7), ("b", 4)]
    assert s["total"] == 4 and s["truncated"] is True


def test_search_sections_keeps_no_markdown_analysis_on_the_concepts(tmp_path):
    """The index (or its bound's failure) is what is kept per revision; the analyses its build
    read would only hold memory between calls."""
    from knowspec.impl.okf.model import load_snapshot

    bundle = write_bundle(tmp_path, {"a.md": EXAMPLE, "b.md": "---\ntype: Note\n---\n# Other\n\n## Jitter\ntext\n"})
    out = call(bundle, "jitter")
    assert sorted(hit["heading"] for hit in out.structured["hits"]) == ["Jitter", "Retry"]
    snapshot = load_snapshot(bundle, CallContext())
    assert all(concept.kept_markdown() is None for concept in snapshot.concepts.values())
