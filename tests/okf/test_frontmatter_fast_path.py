"""The frontmatter loader's event path gives exactly what the composed path gives, or defers to it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.parsing import frontmatter as fm

SCALARS = ["a", "x-y", "true", "False", "no", "yes", "~", "null", "", "1", "-0x1f", "0o17", "1_000", "1.5e3",
           ".inf", ".NaN", "2026-06-19", "2026-06-19T10:00:00Z", '"quoted 1"', "'single'", '"true"', "[1, 2]",
           "{k: v}", "'it''s'", "#c", "é ü", "[a, '', ~]"]
TRICKY = ["<<", "*ref", "&ref v", "!!str 3", "!tag v", "[1, 2", "a: b: c", "{<<: {k: 1}}"]  # other paths, or errors
KEYS = ["type", "title", "tags", "k", "1", "true", "~", '"type"', "dup", "dup", "dup2", "dup2", "''"]
TRICKY_KEYS = ["<<", "? [a]", "&a k", "*a", "!!str k"]


class Pairs(list):
    """(key, node) pairs, rendered as a block mapping (repeated keys kept)."""


def render(node, indent: int = 0) -> str:
    """Block YAML of a node: scalars inline after their key or dash, collections indented below."""
    pad = " " * indent
    if isinstance(node, Pairs):
        return "\n".join(f"{pad}{k}:" + (f" {v}" if isinstance(v, str) else "\n" + render(v, indent + 2))
                         for k, v in node)
    return "\n".join(f"{pad}-" + (f" {v}" if isinstance(v, str) else "\n" + render(v, indent + 2)) for v in node)


scalars = st.sampled_from(SCALARS * 8 + TRICKY)  # mostly the event path, now and then the other
keys = st.sampled_from(KEYS * 8 + TRICKY_KEYS)
nodes = st.recursive(
    scalars,
    lambda child: st.one_of(st.lists(st.tuples(keys, child), min_size=1, max_size=4).map(Pairs),
                            st.lists(child, min_size=1, max_size=3)),
    max_leaves=12,
)
mappings = st.lists(st.tuples(keys, nodes), min_size=1, max_size=5).map(
    lambda pairs: render(Pairs(pairs)))


def outcome(load, text: str):
    """The loaded mapping with every scalar's type, or the error's class and text."""
    try:
        return ("ok", _shape(load(text)))
    except (fm.FrontmatterError, fm.YamlLimitError) as exc:
        return (type(exc).__name__, str(exc))


def _shape(value):
    if isinstance(value, dict):
        return ("map", sorted(getattr(value, "duplicates", ())),
                [(_shape(k), _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return (type(value).__name__, str(value) if isinstance(value, str) else value,
            getattr(value, "tag", None), repr(getattr(value, "value", None)))


@settings(max_examples=400, deadline=None)
@given(mappings)
def test_event_path_equals_composed_path(text):
    assert outcome(fm.load_yaml_mapping, text) == outcome(fm._composed_mapping, text)


@settings(max_examples=100, deadline=None)
@given(mappings, mappings)
def test_event_path_defers_on_two_documents_and_errors(first, second):
    for text in (f"{first}\n---\n{second}", f"{first}\n  bad: [", f"k: {first}\n\t- x"):
        assert outcome(fm.load_yaml_mapping, text) == outcome(fm._composed_mapping, text)


def test_plain_frontmatter_takes_the_event_path():
    text = "type: Reference\ntitle: A\ntags: [a, b]\ncount: 3\nwhen: 2026-06-19\nx:\n  - {k: v}\n"
    assert fm._plain_mapping(text) is not None


def test_anchors_aliases_tags_and_merges_take_the_composed_path():
    for text in ("a: &x 1\nb: *x\n", "a: !!str 1\n", "base: {k: 1}\nc:\n  <<: {k: 2}\n", "? [a]\n: b\n"):
        assert fm._plain_mapping(text) is None


def test_duplicated_keys_are_recorded_on_the_event_path():
    loaded = fm._plain_mapping("a: 1\nb: 2\na: 3\nn: {c: 1, c: 2}\n")
    assert loaded.duplicates == frozenset({"a"}) and loaded["n"].duplicates == frozenset({"c"})
    assert loaded["a"] == "3" and loaded["a"].tag == "int"


def test_a_tree_near_the_depth_limit_takes_the_composed_path():
    deep = "a: " + "[" * 40 + "]" * 40
    assert fm._plain_mapping(deep) is None
    too_deep = "a: " + "[" * 70 + "]" * 70
    assert outcome(fm.load_yaml_mapping, too_deep) == ("YamlLimitError", "YAML nesting depth exceeds the limit")


def split_by_lines(text: str):
    """The delimiter rule read line by line: the first line after the opener that is exactly
    ``---`` (one trailing CR dropped) closes the frontmatter."""
    lines = text.split("\n")
    if lines[0].removesuffix("\r") != "---":
        return (False, "", text, 1, 0, 0)
    offset = len(lines[0]) + 1
    for number, line in enumerate(lines[1:], start=2):
        if line.removesuffix("\r") == "---" and offset <= len(text):
            rest = text[offset + len(line) + 1:] if offset + len(line) < len(text) else ""
            body_line = number + 1
            for ending in ("\r\n", "\n"):
                if rest.startswith(ending):
                    rest, body_line = rest[len(ending):], body_line + 1
                    break
            body_offset = len(text) - len(rest)
            for ending in ("\r\n", "\n"):
                if rest.endswith(ending):
                    rest = rest[: -len(ending)]
                    break
            return (True, text[len(lines[0]) + 1:offset], rest, body_line, len(lines[0]) + 1, body_offset)
        offset += len(line) + 1
    return "unterminated"


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["---", "---\r", "--- ", "----", "a: 1", "", "\r", "---\r\r", "x---", "b"]),
                max_size=8),
       st.sampled_from(["", "\n", "\r\n"]))
def test_split_document_follows_the_line_rule(lines, ending):
    text = "\n".join(lines) + ending
    try:
        split = fm.split_document(text)
        got = (split.has_frontmatter, split.frontmatter_yaml, split.body, split.body_start_line,
               split.frontmatter_offset, split.body_offset)
    except fm.FrontmatterError:
        got = "unterminated"
    assert got == split_by_lines(text)


# --- the line path: one-line scalars in block mappings and sequences -------------------------

LINE_SCALARS = ["a", "a b", "a  b", "http://x.io/p#frag", "x:y", "It's", 'say "hi"', "é ü", "true", "Null", "~",
                "1", "+1", "0x1F", "1_000", ".5", "2026-06-19", "2026-06-19T10:00:00Z", "a|b", "a{b}", "a[b]",
                '"q"', "'q'", '"a#b: c"', "''", '""', "[a, b]", "[]", "[ ]", "['a', \"b\"]", "[1, true, ~, x y]",
                "[a,b]"]  # the line path reads these
LINE_TRICKY = ["a: b", "a #c", "a#c", "x:", "- x", "-1", "?x", ":x", "<<", "|", ">", "&a x", "*a", "!t x", "%x",
               "@x", "`x", ",x", '"open', "'open", "'it''s'", '"a\\"b"', "[a, b,]", "[a: b]", "[a, [b]]",
               '["a,b"]', "{a: 1}", "a\tb", "a\u00a0b", "a\u2028b", "a\x85b", "\ufeffa", "a\rb"]  # these it leaves
LINE_KEYS = ["type", "k", "dup", "dup", "true", "null", "a.b", "a-b", "_x", "1", "x y", "k1", "<<", '"q"', "k:", "- k"]
INDENTS = st.sampled_from([0, 0, 0, 2, 2, 4, 1, 3])
line_scalars = st.sampled_from(LINE_SCALARS * 3 + LINE_TRICKY)
line_keys = st.sampled_from(LINE_KEYS[:9] * 4 + LINE_KEYS[9:])
lines = st.one_of(
    st.builds(lambda i, k, v: f"{' ' * i}{k}: {v}", INDENTS, line_keys, line_scalars),
    st.builds(lambda i, k: f"{' ' * i}{k}:", INDENTS, line_keys),
    st.builds(lambda i, v: f"{' ' * i}- {v}", INDENTS, line_scalars),
    st.builds(lambda i, k, v: f"{' ' * i}- {k}: {v}", INDENTS, line_keys, line_scalars),
    st.builds(lambda i, k: f"{' ' * i}- {k}:", INDENTS, line_keys),
    st.sampled_from(["", "  ", "# note", "  -", "-", "...", "continued words", "k:  v  ", "k:   ", "k: v # c"]),
)
line_texts = st.builds(lambda first, rest, end: "\n".join([first, *rest]) + end,
                       st.builds(lambda k, v: f"{k}: {v}", line_keys, line_scalars), st.lists(lines, max_size=8),
                       st.sampled_from(["", "\n", "\n  \n"]))




class Indentless(list):
    """A sequence written at its key's own indent."""


def render_block(node, indent: int = 0) -> list[str]:
    """Block YAML lines of a mapping (Pairs) or sequence; a mapping item opens on its dash's line."""
    pad = " " * indent
    out = []
    if isinstance(node, Pairs):
        for key, value in node:
            if isinstance(value, str):
                out.append(f"{pad}{key}: {value}")
            else:
                out.append(f"{pad}{key}:")
                out += render_block(value, indent + (0 if isinstance(value, Indentless) else 2))
        return out
    for item in node:
        if isinstance(item, str):
            out.append(f"{pad}- {item}")
        else:
            inner = render_block(item, indent + 2)
            out += [f"{pad}- {inner[0].lstrip(' ')}", *inner[1:]] if isinstance(item, Pairs) else [f"{pad}-", *inner]
    return out


block_keys = st.sampled_from(LINE_KEYS[:9] * 12 + LINE_KEYS[9:])  # mostly the line path, now and then not
block_nodes = st.recursive(
    st.sampled_from(LINE_SCALARS * 30 + LINE_TRICKY),
    lambda child: st.one_of(st.lists(st.tuples(block_keys, child), min_size=1, max_size=4).map(Pairs),
                            st.lists(child, min_size=1, max_size=3),
                            st.lists(child, min_size=1, max_size=3).map(Indentless)),
    max_leaves=14,
)
block_texts = st.builds(lambda pairs, end: "\n".join(render_block(Pairs(pairs))) + end,
                        st.lists(st.tuples(block_keys, block_nodes), min_size=1, max_size=5),
                        st.sampled_from(["", "\n", "  \n"]))


@settings(max_examples=1500, deadline=None)
@given(st.one_of(line_texts, block_texts, block_texts))
def test_line_path_equals_composed_path_or_defers(text):
    loaded = fm._line_mapping(text)
    if loaded is not None:
        assert ("ok", _shape(loaded)) == outcome(fm._composed_mapping, text)


def test_block_frontmatter_takes_the_line_path():
    text = ('type: concept\nx-llmwiki:\n  schemaVersion: "0.1"\n  confidence: 0.85\n  sources:\n    - a.md\n'
            '  citations:\n    - file: a.md\n      line: 3\n    - file: b.md\ntitle: Views | Databricks on AWS\n'
            'source: https://docs.example.com/a#b\ntags:\n- views\n- feature-store\nempty:\nlisted: [a, 2, "c d"]\n')
    loaded = fm._line_mapping(text)
    assert loaded is not None and outcome(lambda _: loaded, text) == outcome(fm._composed_mapping, text)
    assert loaded["x-llmwiki"]["citations"] == [{"file": "a.md", "line": "3"}, {"file": "b.md"}]
    assert loaded["empty"].tag == "null" and loaded["listed"][1].tag == "int"


def test_line_path_records_duplicated_keys():
    loaded = fm._line_mapping("a: 1\nb: 2\na: 3\nn:\n  c: 1\n  c: 2\n")
    assert loaded.duplicates == frozenset({"a"}) and loaded["n"].duplicates == frozenset({"c"})
    assert loaded["a"] == "3" and loaded["a"].tag == "int"


def test_comments_continuations_and_escapes_leave_the_line_path():
    for text in ("a: 1 # c\n", "a: b\n  c\n", 'a: "x\\ty"\n', "a: 1\n\nb: 2\n", "a: |\n  x\n", "a:\tb\n"):
        assert fm._line_mapping(text) is None


def test_a_line_read_again_gives_an_equal_unshared_value():
    first = fm._line_mapping("type: Note\ntags: [x, 1]\n")
    again = fm._line_mapping("type: Note\ntags: [x, 1]\n")
    assert outcome(lambda _: again, "") == outcome(lambda _: first, "") and again["tags"] is not first["tags"]
    first["tags"].append("z")
    assert fm._line_mapping("tags: [x, 1]\n")["tags"] == ["x", "1"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["---", "---\r", "a: é", "t: x", "", "\r", "béta ü", "b"]), max_size=8),
       st.sampled_from(["", "\n", "\r\n"]))
def test_a_document_cuts_its_frontmatter_and_body_where_the_split_rule_does(lines, ending):
    from knowspec.impl.okf.model import Document

    text = "\n".join(lines) + ending
    document = Document("c.md", text.encode())
    try:
        split = fm.split_document(text)
    except fm.FrontmatterError:
        assert document.parse_error is not None
        return
    if document.parse_error is None:
        assert (document.has_frontmatter, document.frontmatter_yaml, document.body, document.body_start_line) == (
            split.has_frontmatter, split.frontmatter_yaml, split.body, split.body_start_line)


def test_short_scalars_are_shared_across_documents_and_a_documents_own_are_not():
    """A tag repeats across a bundle (one copy); a timestamp or a title is one document's own, and
    interning it would only grow the interpreter's table (``MAX_SHARED_SCALAR``)."""
    title = "Distributed training with DeepSpeed"
    for load in (fm._line_mapping, fm.load_yaml_mapping):
        first = load(f'tag: multi-language\nat: "2026-06-19T20:05:55.048Z"\ntitle: {title}\n')
        again = load(f"tags: [multi-language]\nupdated: '2026-06-19T20:05:55.048Z'\nname: {title}\n")
        assert first["tag"] is again["tags"][0]
        for mine, other in (("at", "updated"), ("title", "name")):
            assert first[mine] == again[other] and first[mine] is not again[other]
