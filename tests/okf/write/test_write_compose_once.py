"""Frontmatter is composed once per migrated concept, and the shortcuts that allow it give the
text the one-edit-at-a-time path gives."""

from __future__ import annotations

import io

import pytest
from hypothesis import assume, given, settings, strategies as st
from ruamel.yaml import YAML
from yaml_nodes import shape

from knowspec.impl.okf.write import yaml_edit, yaml_text
from knowspec.impl.okf.write.migration_plan import MigrationInput, plan_migration
from knowspec.impl.okf.write.yaml_edit import Editor, RootEdits
from knowspec.impl.okf.write.yaml_text import compose, lookup

INDEX_01 = b'---\nokf_version: "0.1"\n---\n# Index\n\n- [A](a.md)\n'
LEGACY = (b"---\ntype: Note\ntimestamp: 2026-01-02T03:04:05Z\n# kept here\n---\n"
          b"Claim.[1]\n\n# Citations\n\n[1] [One](https://one.test/x)\n")

_key = st.sampled_from(["type", "title", "tags", "status", "extra"])
_scalar = st.sampled_from(["N", "'quoted'", '"dq"', "2026-01-01", "yes", "0.2", "&a x", "[1, 2]", "{a: b}"])
_entry = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}\n", _key, _scalar),
    st.builds(lambda k: f"{k}: |\n  block\n\n  text\n", _key),
    st.builds(lambda k, v: f"{k}:\n  - {v}\n  - other\n", _key, _scalar),
    st.builds(lambda k, v: f"{k}:\n  inner: {v}  # note\n", _key, _scalar),
)
_filler = st.sampled_from(["", "\n", "# comment\n", "  # indented comment\n", "\n# c\n\n"])


@st.composite
def frontmatters(draw) -> str:
    """Block mappings with unique keys, comments and blank lines between and after entries."""
    keys = draw(st.lists(_key, unique=True, max_size=4))
    text = draw(_filler)
    for key in keys:
        entry = draw(_entry)
        text += key + entry[entry.index(":"):] + draw(_filler)
    return text


def _one_at_a_time(text: str, items: list[tuple[str, object]]) -> str:
    for key, value in items:
        ed = Editor(text)
        text = ed.set_key(ed.root, ed.nlines, key, value)
    return text


@settings(max_examples=300, deadline=None)
@given(frontmatters())
def test_appending_keys_at_once_gives_the_text_of_setting_them_in_turn(text):
    assume("&" not in text)  # the editor refuses anchors
    items = [("generated", {"by": "process:x", "at": "2026-01-02T03:04:05Z"}),
             ("sources", [{"id": "one", "resource": "https://one.test/x"}])]
    ed = Editor(text)
    assert ed.append_keys(ed.root, ed.nlines, items) == _one_at_a_time(text, items)


_step = st.one_of(st.tuples(st.just("append"), st.sampled_from(["generated", "sources", "title"])),
                  st.tuples(st.just("remove"), _key))


@settings(max_examples=400, deadline=None)
@given(frontmatters(), st.lists(_step, max_size=4))
def test_root_edits_give_the_text_of_editing_and_composing_in_turn(text, steps):
    assume("&" not in text)
    edits: RootEdits | None = RootEdits(Editor(text))
    expected = text
    for kind, key in steps:
        ed = Editor(expected)
        if kind == "append":
            root = edits.editor.root
            assume(not edits.has(key) and (root is None or lookup(root, key) is None))
            edits = edits.append(key, {"by": "process:x"} if key == "generated" else "v")
            expected = ed.set_key(ed.root, ed.nlines, key, {"by": "process:x"} if key == "generated" else "v")
        else:
            edits = edits.remove(key)
            assume(edits is not None)  # declined: the caller composes the edited text instead
            expected = ed.delete_key(ed.root, ed.nlines, key) if ed.root is not None else expected
    assert edits.text() == expected


@pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning")
@settings(max_examples=300, deadline=None)
@given(frontmatters().filter(str.strip))
def test_the_editors_composer_gives_the_round_trip_composers_nodes(text):
    round_trip = YAML(typ="rt", pure=True)
    round_trip.version = (1, 2)
    expected = round_trip.compose(io.StringIO(text))
    got = yaml_text._yaml().compose(io.StringIO(text))  # before the editor's own refusals
    assert (shape(got) if got is not None else None) == (shape(expected) if expected is not None else None)


@pytest.mark.parametrize("policy, kept", [("preserve", "timestamp: 2026-01-02T03:04:05Z\n"),
                                           ("remove_after_copy", "")])
def test_a_concept_with_a_timestamp_and_citations_is_composed_once(monkeypatch, policy, kept):
    composed: list[str] = []

    def counting(text):
        composed.append(text)
        return compose(text)

    monkeypatch.setattr(yaml_edit, "compose", counting)
    inp = MigrationInput(selector="", generated_by="process:x", generated_at={}, conflict_policy="reject",
                         timestamp_policy=policy, computations=[],
                         citations=[{"path": "a.md", "entries": [{"source_id": "one", "legacy_number": 1}]}])
    out = plan_migration({"index.md": INDEX_01, "a.md": LEGACY}, inp, check=lambda: None)
    assert out.blockers == []
    assert len([t for t in composed if "type: Note" in t]) == 1
    assert out.writes["a.md"].decode().startswith(
        "---\ntype: Note\n" + kept + "generated:\n  by: process:x\n  at: \"2026-01-02T03:04:05Z\"\n"
        "sources:\n  - id: one\n    resource: https://one.test/x\n    title: One\n# kept here\n---\n")
