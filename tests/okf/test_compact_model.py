"""The compact forms the read side keeps per document answer exactly as the records they replace."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.okf.parsing.frontmatter import load_yaml_mapping
from knowspec.impl.okf.parsing.markdown import RawLink, _apply_mask, analyse_body
from okf_helpers import ctx, list_concepts, write_bundle

BODY = ("# Title\n\nSee [a](a.md) and `[no](n.md)`.\n\nSetext\n------\n\n"
        "```\n[fenced](f.md)\n```\n\n## Next <b>x</b> [b](b.md#part)\n")


def test_heading_ranges_are_the_same_before_and_after_the_headings_are_built():
    analysis = analyse_body(BODY, 4)
    before = analysis.heading_ranges
    headings = analysis.headings
    assert [(h.level, h.start, h.end, h.text) for h in headings] == before == analysis.heading_ranges
    assert [h.text for h in headings] == ["Title", "Setext", "Next x b"]
    assert [h.level for h in headings] == [1, 2, 2]


def test_links_are_records_with_their_file_lines_on_every_read():
    analysis = analyse_body(BODY, 4)
    assert analysis.links == [RawLink("a.md", 6), RawLink("b.md#part", 15)]
    assert analysis.links == analysis.links and analysis.links is not analysis.links


def test_prose_blanks_code_spans_fences_and_inline_html_keeping_lines():
    analysis = analyse_body(BODY, 1)
    prose = analysis.prose
    assert len(prose) == len(BODY) and prose.count("\n") == BODY.count("\n")
    assert "[no](n.md)" not in prose and "[fenced](f.md)" not in prose and "<b>" not in prose
    assert "[a](a.md)" in prose and "[b](b.md#part)" in prose


@given(st.binary(max_size=64), st.lists(st.tuples(st.integers(0, 64), st.integers(0, 64)), max_size=6))
def test_flat_mask_blanks_exactly_the_listed_spans(data, spans):
    flat = [bound for span in spans for bound in span]
    blanked = bytearray(data)
    for start, end in spans:
        for i in range(start, min(end, len(data))):
            if blanked[i] not in (0x0A, 0x0D):
                blanked[i] = 0x20
    assert _apply_mask(data, flat) == bytes(blanked)


def test_shared_frontmatter_strings_load_equal_and_typed_values_keep_their_tag():
    mapping = load_yaml_mapping("type: concept\ntags: [a, concept]\ncount: 3\n")
    assert mapping == {"type": "concept", "tags": ["a", "concept"], "count": "3"}
    assert mapping["type"] is mapping["tags"][1]  # one shared copy
    assert type(mapping["type"]) is str and mapping["count"].tag == "int"


def test_changing_one_answer_card_leaves_every_other_card_and_later_answers_alone(tmp_path):
    root = write_bundle(tmp_path / "kb", {
        "a.md": "---\ntype: Note\ntitle: A\n---\nA\n",
        "b.md": "---\ntype: Note\ntitle: B\n---\nB\n",
    })
    first = list_concepts(root).structured["concepts"]
    expected = [dict(card, status_state=dict(card["status_state"]), computation=dict(card["computation"]),
                     legacy_derived=dict(card["legacy_derived"])) for card in first]
    first[0]["status_state"]["raw"] = "changed"
    first[0]["computation"]["runtime"] = "changed"
    first[0]["legacy_derived"]["generated"] = "changed"
    assert first[1] == expected[1]
    assert list_concepts(root).structured["concepts"] == expected


def _relations(frontmatter: str) -> list[tuple[str, str, str]]:
    from knowspec.impl.okf.model import document_for

    concept = document_for("a.md", f"---\n{frontmatter}---\nBody\n".encode())
    return [(r.from_ref, r.to_ref, r.relation_type) for r in concept.relations]


def test_relations_are_found_however_their_key_is_spelled_and_wherever_nested():
    assert _relations("type: Note\nrelations:\n  uses:\n    - target: b\n") == [("a", "b", "uses")]
    assert _relations('type: Note\n"rel\\x61tions":\n  uses:\n    - target: b\n') == [("a", "b", "uses")]
    assert _relations("parts:\n  - id: sec\n    relations:\n      uses:\n        - target: b\n") == [
        ("a#sec", "b", "uses")]
    assert _relations("type: Note\nx-meta:\n  deep:\n    - id: sec\n      links: [b]\n") == []


def test_kept_properties_are_made_once_each_and_every_concept_holds_the_same_names_in_one_order():
    from knowspec.impl.okf.model import Concept

    first = Concept("a", "a.md", b"---\ntype: Note\ntitle: T\n---\n# H\n\n[b](b.md)\n")
    second = Concept("b", "b.md", b"---\ntitle: U\n---\nbody\n")
    assert list(first.__dict__) == list(second.__dict__)  # seeded at construction, same order
    assert first.kept_markdown() is None and first.type == "Note" and second.type is None
    analysis = first.markdown
    assert first.markdown is analysis and first.kept_markdown() is analysis
    assert second.title == "U" and second.relations == [] and second.kept_markdown() is None
    assert list(first.__dict__) == list(second.__dict__)  # made values replace their seeds in place


def test_a_copied_concept_still_makes_its_kept_values():
    import copy
    import pickle

    from knowspec.impl.okf.model import Concept

    concept = Concept("a", "a.md", b"---\ntype: Note\n---\n# H\n")
    for clone in (copy.deepcopy(concept), pickle.loads(pickle.dumps(concept))):
        assert clone.type == "Note" and clone.kept_markdown() is None and clone.headings[0].text == "H"


FRONTMATTER = ("type: Note\ntitle: A\ndescription: First\ntags: [x, y]\nstatus: draft\n"
               "stale_after: 2026-01-02\nrelations:\n  uses:\n    - target: b\n")


def test_a_concept_keeps_its_typed_fields_and_relations_but_not_its_frontmatter_mapping():
    from knowspec.impl.okf.model import document_for
    from knowspec.impl.okf.parsing.frontmatter import YamlMap

    concept = document_for("a.md", f"---\n{FRONTMATTER}---\nBody\n".encode())
    assert not any(isinstance(value, YamlMap) for value in vars(concept).values())
    assert (concept.type, concept.title, concept.description, concept.tags) == ("Note", "A", "First", ["x", "y"])
    assert [(r.from_ref, r.to_ref, r.relation_type) for r in concept.relations] == [("a", "b", "uses")]
    assert concept.frontmatter == load_yaml_mapping(FRONTMATTER)


def test_the_frontmatter_loaded_again_keeps_duplicated_keys_and_errors_read_as_empty():
    from knowspec.impl.okf.model import document_for

    duplicated = document_for("a.md", b"---\ntitle: A\ntitle: B\n---\nBody\n")
    assert duplicated.frontmatter.duplicates == {"title"} and duplicated.title is None
    broken = document_for("b.md", b"---\ntitle: [unclosed\n---\nBody\n")
    assert broken.parse_error is not None and broken.frontmatter == {}
    assert document_for("c.md", b"No frontmatter\n").frontmatter == {}


def _query_args(name: str, root, **kw):
    from tool_args import tool_args

    return tool_args(name, bundle_path=str(root), **kw)


def test_warm_search_and_neighbour_cards_load_no_frontmatter_and_match_a_fresh_reading(tmp_path, monkeypatch):
    from knowspec.impl.okf import model
    from knowspec.impl.okf.concept import projection
    from knowspec.impl.okf.tools import query

    root = write_bundle(tmp_path / "kb", {
        "a.md": f"---\n{FRONTMATTER}---\nSee [b](b.md).\n",
        "b.md": "---\ntype: Note\ntitle: B\nverified:\n  - by: human:ann\n    at: 2026-01-01T00:00:00Z\n---\nB\n",
    })
    search = _query_args("search_concepts", root, query="b", as_of="2026-02-01")
    neighbours = _query_args("get_neighbors", root, concept_id="a", direction="both", as_of="2026-02-01")
    first = (query.search_concepts(search, ctx()).structured, query.get_neighbors(neighbours, ctx()).structured)
    loads = []
    real = model.load_yaml_mapping
    monkeypatch.setattr(model, "load_yaml_mapping", lambda text: loads.append(text) or real(text))
    model._recent_frontmatters.documents.clear()
    again = (query.search_concepts(search, ctx()).structured, query.get_neighbors(neighbours, ctx()).structured)
    assert again == first
    assert len(loads) == 1  # get_neighbors' own provenance sources, of the one concept asked
    hit_cards = {hit["concept"]["id"]: hit["concept"] for hit in first[0]["hits"]}
    card, fm = hit_cards["a"], load_yaml_mapping(FRONTMATTER)
    assert (card["status"], card["stale_after"], card["stale"]) == ("draft", "2026-01-02", True)
    assert card["status_state"] == projection.status_state(fm) and card["trust"] == projection.trust_tier(fm)
    assert hit_cards["b"]["trust"] == "human-reviewed" and first[1]["concept"] == card


def test_a_new_revision_remakes_only_the_changed_concepts_card_base(tmp_path, monkeypatch):
    from knowspec.impl.okf.tools import cards

    root = write_bundle(tmp_path / "kb", {f"{name}.md": f"---\ntype: Note\ntitle: {name}\n---\nx\n" for name in "abc"})
    list_concepts(root)
    made = []
    real = cards.card_base
    monkeypatch.setattr(cards, "card_base", lambda concept, profile: made.append(concept.id) or real(concept, profile))
    (root / "b.md").write_text("---\ntype: Note\ntitle: B2\nstatus: draft\n---\nx\n")
    titles = {card["id"]: (card["title"], card["status"]) for card in list_concepts(root).structured["concepts"]}
    assert made == ["b"]
    assert titles == {"a": ("a", "stable"), "b": ("B2", "draft"), "c": ("c", "stable")}


def test_the_text_check_never_rules_out_a_key_spelled_with_escapes():
    from knowspec.impl.okf.model import document_for

    escaped = document_for("a.md", b'---\n"time\\x73tamp": 2026-01-01\n---\nx\n')
    assert escaped.frontmatter_may_hold(b"timestamp") and "timestamp" in escaped.frontmatter
    assert not document_for("b.md", b"---\ntitle: A\n---\ntimestamp in the body\n").frontmatter_may_hold(b"timestamp")


def test_an_index_keeps_its_frontmatter_mapping_for_the_version_read_on_every_call(monkeypatch):
    from knowspec.impl.okf import model

    index = model.document_for("index.md", b"---\nokf_version: '0.2'\n---\n# Index\n")
    loads = []
    monkeypatch.setattr(model, "load_yaml_mapping", lambda text: loads.append(text) or {})
    model._recent_frontmatters.documents.clear()
    assert index.frontmatter == {"okf_version": "0.2"} and index.frontmatter is index.frontmatter
    assert loads == []
