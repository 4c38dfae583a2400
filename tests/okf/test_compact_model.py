"""The compact forms the read side keeps per document answer exactly as the records they replace."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.okf.parsing.frontmatter import load_yaml_mapping
from knowspec.impl.okf.parsing.markdown import RawLink, _apply_mask, analyse_body
from okf_helpers import list_concepts, write_bundle

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
