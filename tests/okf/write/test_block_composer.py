"""The block composer answers only where ruamel composes the very same tree, and it does answer
for the common frontmatter shape."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings, strategies as st
from optional_data import DATABRICKS
from ruamel.yaml.error import YAMLError
from yaml_nodes import shape

from knowspec.impl.okf.write import yaml_text
from knowspec.impl.okf.write.block_composer import compose_block_subset

COMMON = (
    "type: concept\n"
    "x-llmwiki:\n"
    '  schemaVersion: "0.1"\n'
    "  confidence: 0.95\n"
    "  sources:\n"
    "    - a-page.md\n"
    "  citations:\n"
    "    - file: a-page.md\n"
    "      line: 12\n"
    "title: Auto-assign metastores | Databricks on AWS\n"
    "description: Admins must set a metastore, ensuring new workspaces receive one.\n"
    "tags:\n"
    "  - unity-catalog\n"
    "  - 'quoted: tag'\n"
    'timestamp: "2026-06-19T19:36:32.396Z"\n'
    "generated_at: 2026-06-19\n"
)


def ruamel_shape(text: str) -> object:
    """ruamel's tree of ``text``, or the name of the error it raises."""
    try:
        node = yaml_text._yaml().compose(io.StringIO(text))
    except YAMLError as exc:
        return type(exc).__name__
    return shape(node) if node is not None else None


def test_the_common_frontmatter_shape_is_composed_without_ruamel():
    root = compose_block_subset(COMMON)
    assert root is not None
    assert shape(root) == ruamel_shape(COMMON)


@pytest.mark.parametrize("text", [
    "a: b  # comment\n", "a: b\n\nc: d\n", "a:\tb\n", "a: b\r\n", "a: |\n  block\n", "a: >\n  folded\n",
    "a: [1, 2]\n", "a: {b: c}\n", "a: &x b\n", "a: *x\n", "a: !tag b\n", 'a: "esc\\"aped"\n', "a: 'it''s'\n",
    "a: b\n  continued\n", "a:\n- indentless\n", "a:\nb: c\n", "a:\n", "a: b", "- a\n", "  a: b\n",
    "a: b: c\n", "a: b:\n", "a: -1\n", "a:\n  - \n", "a:\n  -   wide\n", "a: b\u2028c\n", "a: \ufeffb\n",
    "a:\n  - x\n    - y\n", "a: b\n...\n", "%YAML 1.2\n---\na: b\n", "'a': b\n", f"{'k' * 1100}: v\n", "a: \"open\n",
])
def test_text_outside_the_plain_block_shape_is_left_to_ruamel(text):
    assert compose_block_subset(text) is None


_plain = st.sampled_from(["N", "0.95", "yes", "2026-01-01", "2026-06-18T08:13:02.824Z", "~", ".inf", "a#b",
                         "https://x.test/a?b=c", "'q'", '"dq"', "'a: b'", '"# c"', "a  b", "…ü😀", "= ", "<<"])
_words = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ./()+,é|-]{0,12}[A-Za-z0-9]", fullmatch=True)
_hostile = st.sampled_from(["-1", "a: b", "a #b", "x:", '"a\\"b"', "'it''s'", '"', "[1]", "{a: b}", "&a x", "*a",
                            "!t x", "|", ">", "% x", "@x", "`x`", "x\u2028y", "\x07", "  lead", "trail  "])
_any_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)


EDGES = ("keys", "scalars", "offsets", "dashes", "pads", "item_shifts", "fillers", "empty")


class Shapes:
    """What a generated frontmatter may hold: the plain block shape, with the ``edges`` named
    (some of :data:`EDGES`) mixed in; one edge at a time keeps most of a text in the shape."""

    def __init__(self, edges: frozenset[str] = frozenset()) -> None:
        keys = ["type", "title", "tags", "a.b", "x-y", "_k", "true", "null", "x2"]
        self.key = st.sampled_from(keys + (["1", "<<", "k" * 1030, "'q'", "a b"] if "keys" in edges else []))
        # One edge value among several plain ones: a text then stays in the shape but for it.
        self.scalar = st.one_of(_plain, _words, *((_plain, _words, _plain, _hostile, _any_text)
                                                  if "scalars" in edges else ()))
        self.offsets = [2, 4] + ([0, 1, 3] if "offsets" in edges else [])
        self.dashes = [" "] + (["  ", ""] if "dashes" in edges else [])
        self.pads = [""] + ([" "] if "pads" in edges else [])
        self.item_shifts = [0] + ([0, 2, -1] if "item_shifts" in edges else [])
        self.fillers = [""] + (["", "\n", "# c\n", "  more\n"] if "fillers" in edges else [])
        self.kinds = ["scalar", "map", "seq", "seqmap"] + (["empty"] if "empty" in edges else [])

    @st.composite
    def value(draw, self, indent: int, depth: int) -> str:
        """A value for a key at ``indent``: an inline scalar or a nested block."""
        kind = draw(st.sampled_from(self.kinds if depth < 3 else ["scalar"]))
        if kind == "scalar":
            return " " + draw(self.scalar) + draw(st.sampled_from(self.pads)) + "\n"
        if kind == "empty":
            return "\n"
        inner = indent + draw(st.sampled_from(self.offsets))
        if kind == "map":
            return "\n" + draw(self.mapping(inner, depth + 1))
        lines = "\n"
        for _ in range(draw(st.integers(1, 3))):
            if kind == "seq":
                shift = draw(st.sampled_from(self.item_shifts))
                lines += " " * max(inner + shift, 0) + "-" + draw(st.sampled_from(self.dashes)) + draw(self.scalar) + "\n"
            else:
                lines += " " * inner + "- " + draw(self.mapping(inner + 2, depth + 1))[inner + 2:]
        return lines

    @st.composite
    def mapping(draw, self, indent: int = 0, depth: int = 0) -> str:
        text = ""
        for key in draw(st.lists(self.key, min_size=1, max_size=4)):
            text += " " * indent + key + ":" + draw(self.value(indent, depth))
            text += draw(st.sampled_from(self.fillers))
        return text


CLEAN = Shapes()
NEAR_THE_SHAPE = st.one_of(st.sampled_from(EDGES).flatmap(lambda edge: Shapes(frozenset({edge})).mapping()),
                           Shapes(frozenset(EDGES)).mapping())


@settings(max_examples=300, deadline=None)
@given(CLEAN.mapping())
def test_the_plain_block_shape_is_composed_as_ruamel_composes_it(text):
    root = compose_block_subset(text)
    assert root is not None
    assert shape(root) == ruamel_shape(text)


@settings(max_examples=800, deadline=None)
@given(NEAR_THE_SHAPE)
def test_where_the_block_composer_answers_ruamel_composes_the_same_tree(text):
    root = compose_block_subset(text)
    if root is not None:
        assert shape(root) == ruamel_shape(text)


# Characters and pairs that end, quote or escape a scalar, or start something else.
_pieces = ["a", "b", " ", ":", "#", " #", ": ", "'", "''", '"', "\\", "-", "- ", "?", "[", "]", "{", "}", ",", "&",
           "*", "!", "|", ">", "%", "@", "`", ".", "~"]
_punctuated = st.lists(st.sampled_from(_pieces), min_size=1, max_size=6).map("".join)
_quoted = st.builds(lambda quote, inner: quote + inner + quote, st.sampled_from("'\""), _punctuated)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_punctuated, _quoted), st.sampled_from(["k: {}\n", "k:\n  - {}\n", "k:\n  - a: {}\n    b: c\n", "k: {}\nn: 1\n"]))
def test_a_one_line_value_is_composed_as_ruamel_composes_it_or_left_to_ruamel(value, frame):
    """Dense over the characters that end, quote or escape a scalar, or start something else."""
    text = frame.format(value)
    root = compose_block_subset(text)
    if root is not None:
        assert shape(root) == ruamel_shape(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(CLEAN.mapping(), NEAR_THE_SHAPE))
def test_the_editor_composes_what_ruamel_composes(text):
    """``yaml_text.compose`` (block composer first) agrees with ruamel alone, refusals included."""
    expected = ruamel_shape(text)
    try:
        root = yaml_text.compose(text)
    except yaml_text.YamlRejected as exc:
        assert (exc.code == "yaml_syntax_error") == isinstance(expected, str)
        return
    assert isinstance(expected, tuple) and shape(root) == expected


@pytest.mark.corpus
def test_every_corpus_frontmatter_the_block_composer_answers_matches_ruamel():
    answered = 0
    for path in sorted(DATABRICKS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---\n"):
            continue
        frontmatter = text[4:text.index("\n---", 3) + 1]
        root = compose_block_subset(frontmatter)
        if root is not None:
            answered += 1
            assert shape(root) == ruamel_shape(frontmatter), path.name
    assert answered > 5000  # the shape this module exists for: nearly every concept of the corpus
